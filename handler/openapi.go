package handler

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// OpenAPI is the OpenAPI 3 description of every route payd serves, written
// by hand beside the handlers it describes; a test holds the two together.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPI serves GET /openapi.yaml.
func openAPI(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "application/yaml", OpenAPI)
}
