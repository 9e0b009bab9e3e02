package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// readFormCanonical is canonicalMultipart as it was written on
// multipart.Reader.ReadForm (which spills a file over 1 MiB to a temporary
// file): the reference the streaming reader must agree with, so that a
// retry across an upgrade keeps its fingerprint.
func readFormCanonical(t *testing.T, body []byte, boundary string) []byte {
	t.Helper()
	form, err := multipart.NewReader(bytes.NewReader(body), boundary).ReadForm(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = form.RemoveAll() }()
	files := map[string][]string{}
	for name, fhs := range form.File {
		for _, fh := range fhs {
			f, err := fh.Open()
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			_, _ = io.Copy(h, f)
			f.Close()
			files[name] = append(files[name], hex.EncodeToString(h.Sum(nil)))
		}
	}
	out, err := json.Marshal(map[string]any{"fields": form.Value, "files": files})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func canonicalOf(body []byte, contentType string) ([]byte, error) {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set(echo.HeaderContentType, contentType)
	out, _, err := canonicalMultipart(echo.New().NewContext(req, httptest.NewRecorder()), body)
	return out, err
}

// TestCanonicalMultipart: the streaming reader sees a form as ReadForm
// did (fields, files by their hashes, several under one name, a part with
// no form name left out, a file of 3 MiB, a field of 3 MiB), under any
// boundary; a cut body, a form of too many parts and one of more than
// 11 MiB of fields are malformed.
func TestCanonicalMultipart(t *testing.T) {
	type part struct{ name, file, content string }
	forms := map[string][]part{
		"a file and a field":    {{"file", "settlement.csv", "charge_id,amount\\nch_1,12.00\\n"}, {"dry_run", "", "true"}},
		"two files, one name":   {{"file", "a.csv", "a"}, {"file", "b.csv", "b"}, {"note", "", ""}},
		"fields only":           {{"dry_run", "", "false"}, {"dry_run", "", "true"}},
		"nothing":               {},
		"a part without a name": {{"", "", "ignored"}, {"file", "x.csv", "x"}},
		"a file of three MiB":   {{"file", "big.csv", strings.Repeat("ch_1,12.00\\n", 3<<20/11)}},
		"an empty file":         {{"file", "empty.csv", ""}},
		"a field of 3 MiB":      {{"note", "", strings.Repeat("n", 3<<20)}, {"file", "s.csv", "s"}},
	}
	for name, parts := range forms {
		var want []byte
		for _, boundary := range []string{"first-boundary", "another-one-entirely"} {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			if err := mw.SetBoundary(boundary); err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				var w io.Writer
				var err error
				switch {
				case p.file != "":
					w, err = mw.CreateFormFile(p.name, p.file)
				case p.name == "":
					w, err = mw.CreatePart(nil)
				default:
					w, err = mw.CreateFormField(p.name)
				}
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.WriteString(w, p.content)
			}
			mw.Close()
			got, err := canonicalOf(b.Bytes(), mw.FormDataContentType())
			if err != nil {
				t.Fatalf("%s under %s: %v", name, boundary, err)
			}
			if ref := readFormCanonical(t, b.Bytes(), boundary); !bytes.Equal(got, ref) {
				t.Errorf("%s: %s, want what ReadForm saw: %s", name, got, ref)
			}
			if want == nil {
				want = got
			} else if !bytes.Equal(got, want) {
				t.Errorf("%s: %s under %s, %s under the first boundary", name, got, boundary, want)
			}
		}
	}

	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	w, _ := mw.CreateFormFile("file", "s.csv")
	_, _ = io.WriteString(w, "ch_1,12.00\n")
	mw.Close()
	cut := b.Bytes()[:b.Len()-10]
	if _, err := canonicalOf(cut, mw.FormDataContentType()); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("a cut body = %v, want ErrMalformedBody", err)
	}
	b.Reset()
	mw = multipart.NewWriter(&b)
	for range maxFormParts + 1 {
		_ = mw.WriteField("f", "v")
	}
	mw.Close()
	if _, err := canonicalOf(b.Bytes(), mw.FormDataContentType()); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("%d parts = %v, want ErrMalformedBody", maxFormParts+1, err)
	}
	b.Reset()
	mw = multipart.NewWriter(&b)
	for range 3 {
		_ = mw.WriteField("note", strings.Repeat("n", 4<<20)) // 12 MiB of fields in all
	}
	mw.Close()
	if _, err := canonicalOf(b.Bytes(), mw.FormDataContentType()); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("12 MiB of fields = %v, want ErrMalformedBody", err)
	}
	if _, err := canonicalOf([]byte("x"), "multipart/form-data"); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("no boundary = %v, want ErrMalformedBody", err)
	}
}
