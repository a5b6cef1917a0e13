package fakeplatform

import "unicode/utf16"

// Profile is the behaviour of one imitated platform. The profile is the first
// path segment of every platform request (/telegram/chats/…), so one fake
// serves every profile at once; chats of different profiles are distinct
// even when their ids are equal.
type Profile struct {
	// Name is the path segment and the journal's "profile" field.
	Name string
	// MaxTextUnits is the longest accepted text, counted in UTF-16 code
	// units as the real platforms count it (a character outside the Basic
	// Multilingual Plane, such as most emoji, counts 2).
	MaxTextUnits int
	// HonoursIdempotencyKey reports whether a repeated idempotency key
	// within the dedup window returns the existing message instead of
	// creating a new one (Discord's nonce with enforce_nonce).
	HonoursIdempotencyKey bool
}

// Profile names, the first path segment of every platform request.
const (
	// ProfileTelegram: 4096 UTF-16 units; idempotency keys are ignored.
	ProfileTelegram = "telegram"
	// ProfileDiscord: 2000 UTF-16 units; idempotency keys are honoured
	// within the dedup window.
	ProfileDiscord = "discord"
	// ProfileSlack: 3900 UTF-16 units (under Slack's advised 4000);
	// idempotency keys are ignored.
	ProfileSlack = "slack"
)

// AllProfiles returns every profile the fake serves.
func AllProfiles() []Profile {
	return []Profile{
		{Name: ProfileTelegram, MaxTextUnits: 4096},
		{Name: ProfileDiscord, MaxTextUnits: 2000, HonoursIdempotencyKey: true},
		{Name: ProfileSlack, MaxTextUnits: 3900},
	}
}

// LookupProfile returns the profile called name.
func LookupProfile(name string) (Profile, bool) {
	for _, p := range AllProfiles() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// UTF16Len returns the length of s in UTF-16 code units, the unit in which
// the platforms measure message length.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if l := utf16.RuneLen(r); l > 0 {
			n += l
		} else {
			n++
		}
	}
	return n
}
