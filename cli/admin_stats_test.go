package cli

import (
	"net"
	"strings"
	"testing"
)

// TestAdminStatsRefusesBadFlags: a bucket other than hour or day and a
// time that is neither RFC 3339 nor a duration are usage errors (exit 2),
// refused before anything is sent: nothing listens at PAYD_URL.
func TestAdminStatsRefusesBadFlags(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // a port nobody listens on: a request sent would fail otherwise
	env := map[string]string{"PAYD_URL": "http://" + addr, "PAYD_ADMIN_TOKEN": "adm_x"}
	for args, want := range map[string]string{
		"-bucket week":          `-bucket "week": want hour or day`,
		"-from yesterday":       `-from "yesterday": want an RFC 3339 time`,
		"-to 2026-12-01":        `-to "2026-12-01": want an RFC 3339 time`,
		"-bucket hour -bogus 1": "flag provided but not defined: -bogus",
	} {
		_, _, err, exit := runEnv(t, env, append([]string{"admin", "stats"}, strings.Fields(args)...)...)
		if err == nil || exit != 2 || !strings.Contains(err.Error(), want) {
			t.Errorf("payd admin stats %s = %v (exit %d), want exit 2 saying %q", args, err, exit, want)
		}
	}
	_, _, err, exit := runEnv(t, env, "admin", "stats")
	if err == nil || exit != 1 || !strings.Contains(err.Error(), "cannot reach payd") {
		t.Errorf("payd admin stats with nothing listening = %v (exit %d), want exit 1: it was sent", err, exit)
	}
}
