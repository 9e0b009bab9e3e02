package telemetry

import "strings"

// secretParams are the route parameters whose values are credentials of a
// sort: an idempotency key is the handle on a stored answer (GET
// /v1/requests/{key} hands it to whoever holds the key and the caller's
// token), so it must not rest in every trace backend payd exports to. An
// order's id or a discrepancy's is no secret and stays, for the reader of
// a trace.
var secretParams = map[string]bool{"key": true}

// spanPath is the url.path a server span records for the request path
// path matched to the Echo route route ("/v1/requests/:key"): the path as
// sent, with each secret parameter's value replaced by its name in braces
// ("/v1/requests/{key}"). A route whose segments cannot be lined up with
// the path (a wildcard) and holds a secret parameter gives its template.
func spanPath(route, path string) string {
	if !strings.Contains(route, ":") {
		return path
	}
	rs, ps := strings.Split(route, "/"), strings.Split(path, "/")
	secret := false
	for i, seg := range rs {
		name, isParam := strings.CutPrefix(seg, ":")
		if !isParam || !secretParams[name] {
			continue
		}
		secret = true
		if len(rs) == len(ps) {
			ps[i] = "{" + name + "}"
		}
	}
	switch {
	case !secret:
		return path
	case len(rs) != len(ps):
		return template(route)
	}
	return strings.Join(ps, "/")
}

// template writes route's parameters in braces, as OpenAPI does.
func template(route string) string {
	rs := strings.Split(route, "/")
	for i, seg := range rs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			rs[i] = "{" + name + "}"
		}
	}
	return strings.Join(rs, "/")
}
