package handler

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/payd/payd/domain"
	"github.com/payd/payd/service"
)

// Registrar registers customers.
type Registrar interface {
	Register(ctx context.Context, req service.Keyed, email, name string) (domain.Customer, string, error)
}

// Customers serves customer registration.
type Customers struct {
	Service Registrar
}

type registerRequest struct {
	keyField
	Email string `json:"email"`
	Name  string `json:"name"`
}

// register creates a customer and returns its token once — and the same
// token again to a replay with the same key.
func (h *Customers) register(c echo.Context) error {
	var req registerRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	cust, token, err := h.Service.Register(c.Request().Context(), keyedOf(c), req.Email, req.Name)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusCreated, registrationJSON{
		Customer: customerJSON{ID: cust.ID, Email: cust.Email, Name: cust.Name, CreatedAt: stamp(cust.CreatedAt)},
		Token:    token,
	})
}
