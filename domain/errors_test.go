package domain

import (
	"errors"
	"fmt"
	"testing"
)

// TestValidationErrors: a list of field errors is still found as a
// *ValidationError by errors.As, collects lists and single errors alike,
// and passes anything else back to stop on.
func TestValidationErrors(t *testing.T) {
	var es ValidationErrors
	if es.Err() != nil {
		t.Fatalf("empty ValidationErrors.Err() = %v, want nil", es.Err())
	}
	_, err := ParseCurrency("EURO")
	if es.Add(err) != nil || es.Add(nil) != nil {
		t.Fatalf("Add(validation error) returned an error to stop on")
	}
	if one, ok := es.Err().(*ValidationError); !ok || one.Field != "currency" {
		t.Fatalf("Err() with one entry = %#v, want that *ValidationError", es.Err())
	}
	more := ValidationErrors{{Field: "items[0].name", Reason: "must be 1 to 200 characters"}, {Field: "items[1].sku", Reason: "bad"}}
	if es.Add(fmt.Errorf("parse items: %w", more)) != nil {
		t.Fatalf("Add(wrapped list) returned an error to stop on")
	}
	if len(es) != 3 {
		t.Fatalf("collected %d errors, want 3: %v", len(es), es)
	}
	boom := errors.New("database down")
	if got := es.Add(boom); got != boom || len(es) != 3 {
		t.Errorf("Add(%v) = %v (len %d), want it back and nothing collected", boom, got, len(es))
	}
	err = fmt.Errorf("create order: %w", es.Err())
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "currency" {
		t.Errorf("errors.As(%v, *ValidationError) = %v, want the first field's error", err, ve)
	}
	var list ValidationErrors
	if !errors.As(err, &list) || len(list) != 3 {
		t.Errorf("errors.As(%v, ValidationErrors) = %v, want all three", err, list)
	}
	if want := `currency: "EURO" is not a supported ISO 4217 currency code; items[0].name: must be 1 to 200 characters; items[1].sku: bad`; es.Error() != want {
		t.Errorf("Error() = %q, want %q", es.Error(), want)
	}
}
