package handler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
)

// settlementUpload reads a reconciliation's multipart upload from the
// body payd holds already (body), part by part: its form fields, and the
// settlement file of the field "file", checked where it lies. The parser
// reads the file again for the run's pages (filePart), from the same body,
// so the file is not copied, in memory or to disk, however large, and the
// run never holds its charges (ADR 0066).
func (h *Admin) settlementUpload(c echo.Context) (reconcileRequest, domain.Settlement, error) {
	var req reconcileRequest
	var file domain.Settlement
	raw, err := body(c)
	if err != nil {
		return req, file, err
	}
	_, params, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil || params["boundary"] == "" {
		return req, file, errMalformedJSON
	}
	if h.Settlements == nil {
		return req, file, errors.New("no settlement parser configured")
	}
	fields := map[string]*string{"from": &req.From, "to": &req.To}
	dry, files := "", 0
	fields["dry_run"] = &dry
	mr := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return req, file, errMalformedJSON
		}
		if part.FileName() != "" {
			if part.FormName() != "file" {
				continue
			}
			if files++; files > 1 {
				continue // counted, and refused below
			}
			open := func() (io.Reader, error) { return filePart(raw, params["boundary"]) }
			if file, err = h.Settlements(open); err != nil {
				if se := (*domain.SettlementError)(nil); errors.As(err, &se) {
					return req, file, &domain.ValidationError{Field: "file", Reason: se.Error()}
				}
				return req, file, err
			}
			continue
		}
		if dst, ok := fields[part.FormName()]; ok && *dst == "" { // the first value, as a form's
			v, err := io.ReadAll(io.LimitReader(part, 1<<10))
			if err != nil {
				return req, file, errMalformedJSON
			}
			*dst = string(v)
		}
	}
	if files != 1 {
		return req, file, &domain.ValidationError{Field: "file", Reason: "upload exactly one settlement CSV as the form field \"file\""}
	}
	req.DryRun = dry == "true"
	return req, file, nil
}

// filePart opens an upload's settlement file again: the first part of raw
// with a file name under the form field "file", read from raw as it lies.
// settlementUpload found it there already, so any error means the body
// changed underneath.
func filePart(raw []byte, boundary string) (io.Reader, error) {
	mr := multipart.NewReader(bytes.NewReader(raw), boundary)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("settlement upload: no file part")
		}
		if err != nil {
			return nil, fmt.Errorf("settlement upload: %w", err)
		}
		if part.FileName() != "" && part.FormName() == "file" {
			return part, nil
		}
	}
}
