// Package layout holds no code: its test keeps herald's imports pointing
// down the stack of SPEC §3 (cmd → gateway → cron → outbox → internal/*),
// and keeps fakeplatform, tzoracle and e2e beside the stack.
package layout
