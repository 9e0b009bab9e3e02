package main

import (
	"io"
	"testing"
)

// TestPreloadFlags: -preload-keep needs -preload, and -preload is a count.
func TestPreloadFlags(t *testing.T) {
	for _, args := range [][]string{{"-preload-keep"}, {"-preload", "-1"}} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) took it", args)
		}
	}
	o, err := parseOptions([]string{"-preload", "1000000", "-preload-keep"}, io.Discard)
	if err != nil || o.preload != 1000000 || !o.preloadKeep {
		t.Errorf("parseOptions(-preload 1000000 -preload-keep) = %+v, %v", o, err)
	}
}
