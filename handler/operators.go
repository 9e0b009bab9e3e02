package handler

import (
	"crypto/sha256"
	"crypto/subtle"

	"github.com/labstack/echo/v4"
)

// SharedOperator is the audit's actor for PAYD_ADMIN_TOKEN, the one token
// every operator may share.
const SharedOperator = "admin"

// ctxOperator holds the name of the operator a request authenticated as.
const ctxOperator = "payd.operator"

// Operator is a named admin token (PAYD_ADMIN_TOKENS): the audit's actor
// for everything done with it is Name.
type Operator struct {
	Name  string
	Token string
}

// operators matches a bearer token against every admin token: the shared
// one and the named ones. Only SHA-256 hashes of the tokens are kept, and
// each presented token is compared with all of them in constant time, so
// neither a token, its length nor which operator matched leaks through
// timing.
type operators struct {
	names  []string
	hashes [][sha256.Size]byte
}

func newOperators(shared string, named []Operator) *operators {
	o := &operators{}
	if shared != "" {
		o.add(SharedOperator, shared)
	}
	for _, op := range named {
		if op.Token != "" {
			o.add(op.Name, op.Token)
		}
	}
	return o
}

// add keeps the hash of the token of name.
func (o *operators) add(name, token string) {
	o.names = append(o.names, name)
	o.hashes = append(o.hashes, sha256.Sum256([]byte(token)))
}

// match returns the operator whose token tok is, or "".
func (o *operators) match(tok string) string {
	if o == nil || tok == "" {
		return ""
	}
	got := sha256.Sum256([]byte(tok))
	found := -1
	for i := range o.hashes { // every hash, always: the loop's time does not say which matched
		if subtle.ConstantTimeCompare(got[:], o.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return ""
	}
	return o.names[found]
}

// operatorOf is the operator a request authenticated as ("" if none).
func operatorOf(c echo.Context) string {
	name, _ := c.Get(ctxOperator).(string)
	return name
}
