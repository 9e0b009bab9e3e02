package handler

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// rendered maps each response schema of openapi.yaml to the type the
// handlers marshal for it.
var rendered = map[string]any{
	"Problem": Problem{}, "FieldError": FieldError{}, "Order": orderJSON{}, "Item": itemJSON{}, "Attempt": attemptJSON{},
	"OrderWithAttempts": orderWithAttempts{}, "OrderPage": pageJSON{}, "Customer": customerJSON{},
	"Registration": registrationJSON{}, "Record": recordJSON{}, "StoredResponse": storedResponse{},
	"AdminRecord": adminRecordJSON{}, "Refund": refundJSON{}, "RefundResult": refundResultJSON{},
	"WebhookEvent": webhookEventJSON{}, "AuditEntry": auditJSON{}, "Discrepancy": discrepancyJSON{},
	"Run": runJSON{}, "TimelineEntry": timelineEntry{}, "Timeline": timelineJSON{},
	"AdminOrder": adminOrderJSON{}, "Books": booksJSON{}, "LedgerEntry": ledgerEntryJSON{}, "Dispute": disputeJSON{},
	"Stats": statsJSON{}, "StatsPoint": statsPointJSON{}, "StatsTotals": statsTotalsJSON{}, "StatsMoney": statsMoneyJSON{},
	"OldestUnknown": oldestUnknownJSON{}, "OutboxEvent": outboxEventJSON{},
	"Endpoint": endpointJSON{}, "EndpointWithSecret": endpointSecretJSON{}, "EndpointList": endpointListJSON{},
	"Delivery": deliveryJSON{}, "DeliveryAttempt": attemptLogJSON{}, "DeliveryList": deliveryListJSON{}, "RedeliverResult": redeliverJSON{},
	"Product": productJSON{}, "ProductList": productListJSON{},
	"Shipment": shipmentJSON{}, "ShipmentLine": shipLineJSON{},
}

// accepted maps each request schema to the type the handlers decode into.
var accepted = map[string]any{
	"RegisterRequest": registerRequest{}, "CreateOrderRequest": createOrderRequest{}, "ItemRequest": itemRequest{},
	"PayRequest": payRequest{}, "KeyOnlyRequest": keyField{}, "RefundRequest": refundRequest{},
	"ReconcileRequest": reconcileRequest{}, "ResolveRequest": resolveRequest{},
	"CreateEndpointRequest": createEndpointRequest{}, "UpdateEndpointRequest": updateEndpointRequest{},
	"CreateProductRequest": createProductRequest{}, "UpdateProductRequest": updateProductRequest{}, "AdjustStockRequest": stockRequest{},
	"ShipmentRequest": shipRequest{}, "ShipmentLineRequest": shipLineJSON{},
}

// jsonField is one key of a type's JSON form.
type jsonField struct {
	typ       reflect.Type
	omitempty bool // omitempty or omitzero: the key may be left out
}

// jsonFields lists the keys encoding/json writes for t, embedded structs
// flattened as encoding/json does.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{typ: f.Type, omitempty: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")}
	}
	return out
}

// schemaProps merges a schema's properties and required list through $ref
// and allOf.
func (d apiDoc) schemaProps(t *testing.T, s map[string]any) (map[string]map[string]any, map[string]bool) {
	t.Helper()
	s = d.resolve(t, s)
	props, required := map[string]map[string]any{}, map[string]bool{}
	for _, part := range list(s["allOf"]) {
		p, r := d.schemaProps(t, d.resolve(t, part))
		for k, v := range p {
			props[k] = v
		}
		for k := range r {
			required[k] = true
		}
	}
	pm, _ := s["properties"].(map[string]any)
	for k, v := range pm {
		props[k], _ = v.(map[string]any)
	}
	for _, r := range list(s["required"]) {
		name, _ := r.(string)
		required[name] = true
	}
	return props, required
}

// schemaType is a property's JSON type, through $ref and a single allOf.
func (d apiDoc) schemaType(t *testing.T, s map[string]any) string {
	s = d.resolve(t, s)
	if typ, ok := s["type"].(string); ok {
		return typ
	}
	if all := list(s["allOf"]); len(all) > 0 {
		if len(all) == 1 {
			return d.schemaType(t, d.resolve(t, all[0]))
		}
		return "object"
	}
	return ""
}

var rawJSON = reflect.TypeOf(json.RawMessage{})

// goJSONType is the JSON type encoding/json gives a Go type ("" for raw JSON).
func goJSONType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawJSON:
		return ""
	case t.Kind() == reflect.String:
		return "string"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Slice:
		return "array"
	case t.Kind() == reflect.Struct:
		return "object"
	}
	return t.Kind().String()
}

// TestOpenAPISchemasMatchRendering: each schema has exactly the keys its Go
// type renders, with the JSON type it renders them as. For responses a key
// is required unless omitempty may drop it, and nullable exactly when it
// can be null (a pointer or raw JSON without omitempty).
func TestOpenAPISchemasMatchRendering(t *testing.T) {
	d := loadAPIDoc(t)
	schemas, _ := d["components"].(map[string]any)["schemas"].(map[string]any)
	check := func(name string, v any, response bool) {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("schema %s is missing from openapi.yaml", name)
			return
		}
		props, required := d.schemaProps(t, s)
		fields := jsonFields(reflect.TypeOf(v))
		if got, want := sortedKeys(props), sortedKeys(fields); got != want {
			t.Errorf("schema %s has properties %s, want %s (as %T renders)", name, got, want, v)
			return
		}
		for key, f := range fields {
			p := props[key]
			if want := goJSONType(f.typ); want != "" && d.schemaType(t, p) != want {
				t.Errorf("%s.%s: type %q, want %q", name, key, d.schemaType(t, p), want)
			}
			if !response {
				continue
			}
			if required[key] == f.omitempty {
				t.Errorf("%s.%s: required = %v, want %v (omitempty %v)", name, key, required[key], !f.omitempty, f.omitempty)
			}
			nullable := !f.omitempty && (f.typ.Kind() == reflect.Pointer || f.typ == rawJSON)
			// A reference is nullable when the schema it names is (OAS
			// 3.0.3 wants nullable beside a type, not beside a $ref).
			if got := d.resolve(t, p)["nullable"] == true; got != nullable {
				t.Errorf("%s.%s: nullable = %v, want %v", name, key, got, nullable)
			}
		}
	}
	for name, v := range rendered {
		check(name, v, true)
	}
	for name, v := range accepted {
		check(name, v, false)
		// decode rejects unknown fields. (The webhook, decoded leniently by
		// the provider adapter, is held to its schema in provider's tests.)
		if s, _ := schemas[name].(map[string]any); s["additionalProperties"] != false {
			t.Errorf("schema %s: additionalProperties = %v, want false (unknown fields are a 400)", name, s["additionalProperties"])
		}
	}
}

func sortedKeys[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
