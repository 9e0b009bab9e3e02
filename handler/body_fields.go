package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/payd/payd/domain"
)

// fieldProblems lists every field of the JSON body b that decoding it into
// a value of type t refuses: unknown fields and values of the wrong JSON
// type, each with its path ("items[1].unit_price"). It mirrors what
// encoding/json accepts (names match case-insensitively, null leaves a
// field alone) and returns nil when b is not JSON at all.
func fieldProblems(b []byte, t reflect.Type) domain.ValidationErrors {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	var out domain.ValidationErrors
	walkJSON(v, t, "", &out)
	return out
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

func walkJSON(v any, t reflect.Type, path string, out *domain.ValidationErrors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || t == rawMessageType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		return // null is accepted everywhere; custom decoders judge for themselves
	}
	wrong := func(want string) {
		reason := "has the wrong type: want " + want
		if _, isNumber := v.(json.Number); isNumber && want == "a string" {
			reason += " (amounts are decimal strings such as \"12.30\")"
		}
		*out = append(*out, &domain.ValidationError{Field: path, Reason: reason})
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		walkObject(m, t, path, out)
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			wrong("an array")
			return
		}
		for i, e := range l {
			walkJSON(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			wrong("an object")
			return
		}
		for _, k := range memberNames(m) {
			walkJSON(m[k], t.Elem(), joinPath(path, k), out)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrong("true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, ok := v.(json.Number); !ok || strings.ContainsAny(n.String(), ".eE") {
			wrong("a whole number")
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			wrong("a number")
		}
	}
}

// walkObject checks each member of m against the struct type t.
func walkObject(m map[string]any, t reflect.Type, path string, out *domain.ValidationErrors) {
	fields := bodyFields(t, nil)
	for _, k := range memberNames(m) {
		ft, ok := fields[k]
		if !ok {
			for name, f := range fields {
				if strings.EqualFold(name, k) {
					ft, ok = f, true
					break
				}
			}
		}
		if !ok {
			*out = append(*out, &domain.ValidationError{Field: joinPath(path, k), Reason: "unknown field"})
			continue
		}
		walkJSON(m[k], ft, joinPath(path, k), out)
	}
}

// bodyFields maps the JSON names of t's fields to their types, embedded
// structs flattened as encoding/json does.
func bodyFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	if into == nil {
		into = map[string]reflect.Type{}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			bodyFields(f.Type, into)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
	return into
}

func memberNames(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
