package handler

import (
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/payd/payd/telemetry"
)

// requestID is Echo's RequestID middleware (X-Request-ID is the tracing ID,
// docs/guarantees.md#http-conventions) with two additions: the ID goes into
// the request's context, so every line logged with that context carries it
// (telemetry.TraceLogs), and a
// caller's own ID is kept only when it is a short plain token — it ends up
// in every log line, so it may not be an arbitrary blob.
func requestID() echo.MiddlewareFunc {
	return middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: uuid.NewString,
		RequestIDHandler: func(c echo.Context, id string) {
			if !validTraceID(id) {
				id = uuid.NewString()
				c.Response().Header().Set(echo.HeaderXRequestID, id)
			}
			r := c.Request()
			c.SetRequest(r.WithContext(telemetry.WithRequestID(r.Context(), id)))
		},
	})
}

// validTraceID accepts 1 to 128 characters of [A-Za-z0-9._:-].
func validTraceID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}
