package provider

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/payd/payd/domain"
)

// MarkUnreachable marks err, a failure to send a request to the provider or
// to read its reply, with domain.ErrProviderUnreachable when the connection
// itself failed: any *net.OpError (a dial refused or timed out, a read or
// write on a connection that broke), a refused or reset connection. Other
// errors pass unchanged. Both adapters mark their transport errors here,
// so nothing above them sniffs sockets.
func MarkUnreachable(err error) error {
	var op *net.OpError
	if err == nil || errors.Is(err, domain.ErrProviderUnreachable) ||
		!(errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)) {
		return err
	}
	return fmt.Errorf("%w: %w", domain.ErrProviderUnreachable, err)
}
