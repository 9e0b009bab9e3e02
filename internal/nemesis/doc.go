// Package nemesis tests payd the way trusted distributed systems are
// tested: a nemesis injects faults on every wire between payd and what it
// talks to (a database node, the provider, a Redis node, and the
// provider's webhook deliveries back to payd) and on whole processes,
// while clients record every request and answer; a checker then proves
// payd's invariants over the whole history.
//
// The wires are Toxiproxy proxies run in the test's own process (Net,
// Link): payd is pointed at a Link's address instead of the real server.
// A Plan is a schedule of faults drawn from a seed, so a failing run
// replays exactly; a Runner applies it and heals everything before it
// returns. A Sampler records per-minute figures (throughput, p99 latency,
// and each replica's memory, goroutines, open files and pool connections)
// for a soak, Growth says what did not come back after the load stopped,
// and WriteSVG charts the minutes.
package nemesis
