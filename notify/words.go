package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// inWords is why a request to an endpoint got no answer, as an operator
// reads it in the delivery log and the list of endpoints: what happened
// and where, not the Go error chain ("Post \"https://…\": dial tcp
// 10.0.0.7:443: connect: connection refused"). An error it does not know
// is kept as it is.
func inWords(err error) string {
	host := ""
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if u, perr := url.Parse(ue.URL); perr == nil {
			host = u.Host
		}
	}
	at := func(s string) string {
		if host == "" {
			return s
		}
		return s + " (" + host + ")"
	}
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.Is(err, ErrRefusedAddress):
		return err.Error()
	case errors.As(err, &dns) && dns.IsNotFound:
		return at("host name not found")
	case errors.As(err, &dns):
		return at("host name could not be looked up")
	case errors.Is(err, syscall.ECONNREFUSED):
		return at("connection refused: nothing listens there")
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return at("no answer in time")
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return at("connection closed before an answer")
	case errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &hostname), errors.As(err, &verify):
		return at("TLS certificate not accepted: " + certWhy(err))
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return at("host unreachable")
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// certWhy is the certificate's fault in a few words.
func certWhy(err error) string {
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &hostname):
		return "it is for another host name"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "it has expired or is not valid yet"
	case errors.As(err, &invalid):
		return "it is not valid"
	}
	return "signed by an authority payd does not trust"
}
