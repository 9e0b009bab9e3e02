package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/payd/payd/client"
	"github.com/payd/payd/domain"
)

// The merchant's endpoints (ADR 0053): `payd admin endpoints ...` and
// `payd admin events redeliver`.

func endpointsList() adminVerb {
	return adminVerb{
		usage: "",
		flags: func(*flag.FlagSet) {},
		run: func(ctx context.Context, a *adminConn, _ []string) error {
			var list client.EndpointList
			res, err := a.api.ListEndpoints(ctx)
			if err := a.get(res, err, &list); err != nil || a.json {
				return err
			}
			printEndpoints(a.out, list)
			return nil
		},
	}
}

func endpointsCreate() adminVerb {
	var events, description, key string
	return adminVerb{
		usage: "URL -events order.paid,order.refunded,... [-description D] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&events, "events", "", "event types, comma-separated ("+strings.Join(names(domain.NotifyTypes), ", ")+"); required")
			fs.StringVar(&description, "description", "", "what the endpoint is for")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a creation whose answer was lost")
		},
		check: func([]string) error {
			if events == "" {
				return usagef("-events is required (run 'payd admin endpoints create -h')")
			}
			for _, t := range strings.Split(events, ",") {
				if err := checkChoice("events", strings.TrimSpace(t), names(domain.NotifyTypes)); err != nil {
					return err
				}
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			var types []client.NotifyType
			for _, t := range strings.Split(events, ",") {
				types = append(types, client.NotifyType(strings.TrimSpace(t)))
			}
			body := client.CreateEndpointRequest{Url: pos[0], Events: types, Description: &description}
			out, _, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.CreateEndpoint(ctx, &client.CreateEndpointParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			var e client.EndpointWithSecret
			if err := a.decode(out, &e); err != nil || a.json {
				return err
			}
			fmt.Fprintf(a.out, "endpoint %s %s (%s)\nsecret %s\nthe secret is shown this once: give it to the shop's receiver now\n", e.Id, e.Url, e.Status, e.Secret)
			return nil
		},
	}
}

func endpointsRotate() adminVerb {
	var key string
	return adminVerb{
		usage: "ENDPOINT_ID [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a rotation whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ENDPOINT_ID", pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			out, _, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.RotateEndpointSecret(ctx, pos[0], &client.RotateEndpointSecretParams{IdempotencyKey: &idemKey}, client.KeyOnlyRequest{})
			})
			if err != nil {
				return err
			}
			var e client.EndpointWithSecret
			if err := a.decode(out, &e); err != nil || a.json {
				return err
			}
			until := "-"
			if e.PreviousSecretUntil != nil {
				until = adminStamp(*e.PreviousSecretUntil)
			}
			fmt.Fprintf(a.out, "endpoint %s: new secret %s\nthe old secret keeps signing beside it until %s UTC\n", e.Id, e.Secret, until)
			return nil
		},
	}
}

// setString is a string flag that knows whether it was given, so
// -description "" (clear it) differs from no -description (leave it).
type setString struct {
	v   string
	set bool
}

func (f *setString) String() string     { return f.v }
func (f *setString) Set(v string) error { f.v, f.set = v, true; return nil }

func endpointsUpdate() adminVerb {
	var url, events, description setString
	var enable, disable bool
	var key string
	return adminVerb{
		usage: "ENDPOINT_ID [-endpoint-url U] [-events T,T,...] [-description D] [-enable|-disable] [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.Var(&url, "endpoint-url", "the endpoint's new URL (-url is payd's own address)")
			fs.Var(&events, "events", "the new event types, comma-separated ("+strings.Join(names(domain.NotifyTypes), ", ")+")")
			fs.Var(&description, "description", "the new description (\"\" clears it)")
			fs.BoolVar(&enable, "enable", false, "send to it again")
			fs.BoolVar(&disable, "disable", false, "stop sending to it (its pending deliveries wait)")
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a change whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ENDPOINT_ID", pos[0]); err != nil {
				return err
			}
			if enable && disable {
				return usagef("-enable and -disable: give one")
			}
			if !url.set && !events.set && !description.set && !enable && !disable {
				return usagef("nothing to change: give -endpoint-url, -events, -description, -enable or -disable (run 'payd admin endpoints update -h')")
			}
			if events.set {
				for _, t := range strings.Split(events.v, ",") {
					if err := checkChoice("events", strings.TrimSpace(t), names(domain.NotifyTypes)); err != nil {
						return err
					}
				}
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			var body client.UpdateEndpointRequest
			if url.set {
				body.Url = &url.v
			}
			if description.set {
				body.Description = &description.v
			}
			if events.set {
				types := []client.NotifyType{}
				for _, t := range strings.Split(events.v, ",") {
					types = append(types, client.NotifyType(strings.TrimSpace(t)))
				}
				body.Events = &types
			}
			if enable || disable {
				body.Enabled = &enable
			}
			out, _, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.UpdateEndpoint(ctx, pos[0], &client.UpdateEndpointParams{IdempotencyKey: &idemKey}, body)
			})
			if err != nil {
				return err
			}
			var e client.Endpoint
			if err := a.decode(out, &e); err != nil || a.json {
				return err
			}
			printEndpoint(a.out, e)
			return nil
		},
	}
}

func endpointsDelete() adminVerb {
	var key string
	return adminVerb{
		usage: "ENDPOINT_ID [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one); reuse it to repeat a deletion whose answer was lost")
		},
		check: func(pos []string) error {
			if err := checkID("ENDPOINT_ID", pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			out, _, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.DeleteEndpoint(ctx, pos[0], &client.DeleteEndpointParams{IdempotencyKey: &idemKey})
			})
			if err != nil {
				return err
			}
			var e client.Endpoint
			if err := a.decode(out, &e); err != nil || a.json {
				return err
			}
			fmt.Fprintf(a.out, "endpoint %s %s deleted, with its delivery log\n", e.Id, e.Url)
			return nil
		},
	}
}

func endpointsDeliveries() adminVerb {
	var status string
	var limit int
	return adminVerb{
		usage: "ENDPOINT_ID [-status pending|delivered|failed] [-limit N]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&status, "status", "", "only this status ("+strings.Join(names(domain.DeliveryStatuses), ", ")+"; default every one)")
			fs.IntVar(&limit, "limit", 50, "deliveries, newest first")
		},
		check: func(pos []string) error {
			if err := checkID("ENDPOINT_ID", pos[0]); err != nil {
				return err
			}
			if status != "" {
				if err := checkChoice("status", status, names(domain.DeliveryStatuses)); err != nil {
					return err
				}
			}
			return checkPage(limit, "")
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			p := client.ListDeliveriesParams{Limit: &limit}
			if status != "" {
				s := client.DeliveryStatus(status)
				p.Status = &s
			}
			var list client.DeliveryList
			res, err := a.api.ListDeliveries(ctx, pos[0], &p)
			if err := a.get(res, err, &list); err != nil || a.json {
				return err
			}
			printDeliveries(a.out, list)
			return nil
		},
	}
}

func eventsRedeliver() adminVerb {
	var key string
	return adminVerb{
		usage: "EVENT_ID [-key K]",
		nargs: 1,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "key", "", "idempotency key (default: a new one)")
		},
		check: func(pos []string) error {
			if err := checkID("EVENT_ID", pos[0]); err != nil {
				return err
			}
			return checkKey(key)
		},
		run: func(ctx context.Context, a *adminConn, pos []string) error {
			idemKey := newIntentKey(key)
			out, _, err := a.change(ctx, func() (*http.Response, error) {
				return a.api.RedeliverEvent(ctx, pos[0], &client.RedeliverEventParams{IdempotencyKey: &idemKey}, client.KeyOnlyRequest{})
			})
			if err != nil {
				return err
			}
			var r client.RedeliverResult
			if err := a.decode(out, &r); err != nil || a.json {
				return err
			}
			fmt.Fprintf(a.out, "event %s: %d deliveries pending again (same webhook-id)\n", r.EventId, r.Deliveries)
			return nil
		},
	}
}

// printEndpoints is the list of endpoints, each with its health: failing
// or not, what waits for it, and its last answer in words.
func printEndpoints(w io.Writer, list client.EndpointList) {
	if len(list.Data) == 0 {
		fmt.Fprintln(w, "no endpoint")
		return
	}
	table(w, "ENDPOINT\tHEALTH\tPENDING\tOLDEST\tLAST ATTEMPT\tURL\tEVENTS\tNOTE", func(tw io.Writer) {
		for _, e := range list.Data {
			h := e.Health
			oldest, last := "-", "-"
			if h.OldestPendingAt != nil {
				oldest = adminStamp(*h.OldestPendingAt)
			}
			if h.LastAttemptAt != nil {
				last = adminStamp(*h.LastAttemptAt) + ": " + cmp.Or(h.LastError, fmt.Sprintf("answered %d", h.LastStatus))
			}
			pending := fmt.Sprint(h.Pending)
			if h.Failed > 0 {
				pending += fmt.Sprintf(" (%d given up)", h.Failed)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Id, h.State, pending, oldest, last, e.Url,
				eventList(e.Events), endpointNote(e.Description, e.DisabledReason, e.FromEnv))
		}
	})
}

// printEndpoint is one endpoint as a change answered it.
func printEndpoint(w io.Writer, e client.Endpoint) {
	table(w, "ENDPOINT\tSTATUS\tURL\tEVENTS\tNOTE", func(tw io.Writer) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Id, e.Status, e.Url, eventList(e.Events), endpointNote(e.Description, e.DisabledReason, e.FromEnv))
	})
}

func eventList(events []client.NotifyType) string {
	types := make([]string, len(events))
	for i, t := range events {
		types[i] = string(t)
	}
	return strings.Join(types, ",")
}

func endpointNote(description, disabledReason string, fromEnv bool) string {
	switch {
	case fromEnv:
		return "PAYD_NOTIFY_URL"
	case disabledReason != "":
		return disabledReason
	}
	return description
}

func printDeliveries(w io.Writer, list client.DeliveryList) {
	if len(list.Data) == 0 {
		fmt.Fprintln(w, "no delivery")
		return
	}
	table(w, "EVENT\tTYPE\tORDER\tSTATUS\tATTEMPTS\tLAST\tCREATED", func(tw io.Writer) {
		for _, d := range list.Data {
			last := fmt.Sprint(d.LastStatus)
			if d.LastError != "" {
				last += " " + d.LastError
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", d.EventId, d.EventType, d.OrderId, d.Status, d.Attempts, last, adminStamp(d.CreatedAt))
		}
	})
}
