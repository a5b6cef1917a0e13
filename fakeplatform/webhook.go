package fakeplatform

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ProfileWebhook is the profile of deliveries to the webhook receiver
// (POST /webhook/{receiver}): the journal's "profile" of what it accepts,
// and the Fault.Profile that matches only them.
const ProfileWebhook = "webhook"

// DefaultWebhookTolerance is how far a webhook-timestamp may lie from the
// fake's clock, either way (the Standard Webhooks reference libraries use
// five minutes).
const DefaultWebhookTolerance = 5 * time.Minute

// WebhookEventType is the only event type the receiver takes: the one
// herald's webhook: platform sends.
const WebhookEventType = "message.created"

// Header names of a Standard Webhooks 1.0 delivery, and herald's marker
// header.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderRedelivery       = "herald-redelivery"
)

// webhookSecretPrefix marks a Standard Webhooks secret: base64 of the key
// follows.
const webhookSecretPrefix = "whsec_"

// webhookVerifier checks a delivery's signature and timestamp.
type webhookVerifier struct {
	key       []byte // nil: no secret configured, every delivery is refused
	tolerance time.Duration
}

func newWebhookVerifier(secret string, tolerance time.Duration) (webhookVerifier, error) {
	if tolerance < 0 {
		return webhookVerifier{}, fmt.Errorf("negative webhook tolerance %v", tolerance)
	}
	if tolerance == 0 {
		tolerance = DefaultWebhookTolerance
	}
	v := webhookVerifier{tolerance: tolerance}
	if secret == "" {
		return v, nil
	}
	key, err := WebhookKey(secret)
	if err != nil {
		return webhookVerifier{}, err
	}
	v.key = key
	return v, nil
}

// WebhookKey returns the HMAC key a webhook secret stands for: the base64
// after "whsec_" (padding optional), or the raw bytes of a secret without
// that prefix. Its errors never quote the secret.
func WebhookKey(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, webhookSecretPrefix)
	if !ok {
		if secret == "" {
			return nil, errors.New("webhook secret is empty")
		}
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("webhook secret is not valid base64 after %s", webhookSecretPrefix)
	case len(key) == 0:
		return nil, fmt.Errorf("webhook secret holds no key after %s", webhookSecretPrefix)
	}
	return key, nil
}

// SignWebhook returns the webhook-signature header value a sender holding
// key puts on a delivery: "v1," and the base64 of HMAC-SHA256(key,
// "{id}.{timestamp}.{body}"). Tests use it to sign their own deliveries.
func SignWebhook(key []byte, id, timestamp string, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(webhookMAC(key, id, timestamp, body))
}

func webhookMAC(key []byte, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// verify reports whether one of the space-separated signatures of header
// (several during a secret rotation) is a v1 signature of id, timestamp and
// body under the key. Signatures of other versions are skipped.
func (v webhookVerifier) verify(header, id, timestamp string, body []byte) bool {
	want := webhookMAC(v.key, id, timestamp, body)
	for _, sig := range strings.Fields(header) {
		b64, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// webhookPayload is the body of a delivery, as herald's webhook: platform
// sends it.
type webhookPayload struct {
	Type string `json:"type"`
	Data struct {
		ChatID     string `json:"chat_id"`
		Text       string `json:"text"`
		Part       *int   `json:"part"`
		Parts      *int   `json:"parts"`
		Redelivery bool   `json:"redelivery"`
	} `json:"data"`
}

// webhookResponse answers an accepted (or deduplicated) delivery.
type webhookResponse struct {
	// ID is the message id (the journal seq of the first delivery).
	ID string `json:"id"`
	// Deduplicated is set when the webhook-id was seen before and nothing
	// new was journalled.
	Deduplicated bool `json:"deduplicated,omitempty"`
}

// handleWebhook is POST /webhook/{receiver}: a Standard Webhooks receiver.
//
// Before any fault, like the authentication layer of a real receiver, it
// checks the headers (400 when webhook-id or webhook-timestamp is missing),
// the signature (401 when missing or not matching the secret) and the
// timestamp (400 when not unix seconds or outside the tolerance on the
// fake's clock), and parses the body (400). Then the armed faults matching
// (send, "webhook", data.chat_id) apply, as to any send. Then it validates
// the payload (400), deduplicates on webhook-id per receiver (a repeat is a
// 200 with the first delivery's id, journalling nothing, for ever), and
// journals a send: chat_id from data.chat_id, the text, webhook-id as the
// idempotency key, data.redelivery, profile "webhook", the receiver.
func (s *Server) handleWebhook(w http.ResponseWriter, r *http.Request) {
	receiver := pathParam(r, "receiver")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		s.refuseWebhook(w, receiver, http.StatusBadRequest, "Bad Request: can't read request body: "+err.Error())
		return
	}
	id := r.Header.Get(HeaderWebhookID)
	ts := r.Header.Get(HeaderWebhookTimestamp)
	sig := r.Header.Get(HeaderWebhookSignature)
	switch {
	case id == "":
		s.refuseWebhook(w, receiver, http.StatusBadRequest, "Bad Request: missing "+HeaderWebhookID+" header")
		return
	case ts == "":
		s.refuseWebhook(w, receiver, http.StatusBadRequest, "Bad Request: missing "+HeaderWebhookTimestamp+" header")
		return
	case s.hook.key == nil:
		s.refuseWebhook(w, receiver, http.StatusUnauthorized, "Unauthorized: no webhook secret configured (start the fake with --webhook-secret)")
		return
	case sig == "":
		s.refuseWebhook(w, receiver, http.StatusUnauthorized, "Unauthorized: missing "+HeaderWebhookSignature+" header")
		return
	case !s.hook.verify(sig, id, ts, body):
		s.refuseWebhook(w, receiver, http.StatusUnauthorized, "Unauthorized: no matching webhook signature")
		return
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		s.refuseWebhook(w, receiver, http.StatusBadRequest, "Bad Request: "+HeaderWebhookTimestamp+" is not unix seconds")
		return
	}
	now := s.clock.Now()
	if skew := now.Sub(time.Unix(secs, 0)); skew > s.hook.tolerance || -skew > s.hook.tolerance {
		which, where := "too old", "before"
		if skew < 0 {
			which, where, skew = "too new", "after", -skew
		}
		s.refuseWebhook(w, receiver, http.StatusBadRequest, fmt.Sprintf("Bad Request: %s %s (%s %s the receiver's clock, tolerance %s)",
			HeaderWebhookTimestamp, which, skew.Round(time.Second), where, s.hook.tolerance))
		return
	}
	var p webhookPayload
	if err := json.Unmarshal(body, &p); err != nil {
		s.refuseWebhook(w, receiver, http.StatusBadRequest, "Bad Request: can't parse request body: "+err.Error())
		return
	}
	profile := Profile{Name: ProfileWebhook, HonoursIdempotencyKey: true}
	req := opRequest{
		op: OpSend, profile: profile, chatID: p.Data.ChatID, text: p.Data.Text,
		key: id, redelivery: p.Data.Redelivery, receiver: receiver,
	}
	invalid := webhookProblem(p, r.Header.Get(HeaderRedelivery))
	s.serveFaulted(w, r, req, func() (int, any) {
		if invalid != "" {
			s.log.Warn("webhook delivery refused", "receiver", receiver, "status", http.StatusBadRequest, "reason", invalid)
			return errorBody(http.StatusBadRequest, invalid)
		}
		return s.performWebhook(req)
	})
}

// webhookProblem returns why a parsed delivery is not one the receiver
// takes, or "".
func webhookProblem(p webhookPayload, redeliveryHeader string) string {
	d := p.Data
	switch {
	case p.Type != WebhookEventType:
		return fmt.Sprintf("Bad Request: unsupported event type %q (want %s)", p.Type, WebhookEventType)
	case d.ChatID == "":
		return "Bad Request: data.chat_id is empty"
	case d.Text == "":
		return descEmpty
	case d.Parts != nil && *d.Parts < 1:
		return fmt.Sprintf("Bad Request: data.parts is %d", *d.Parts)
	case d.Part != nil && (*d.Part < 0 || d.Parts != nil && *d.Part >= *d.Parts):
		return fmt.Sprintf("Bad Request: data.part %d is out of range", *d.Part)
	}
	if redeliveryHeader != "" {
		h, err := strconv.ParseBool(redeliveryHeader)
		if err != nil {
			return fmt.Sprintf("Bad Request: %s header %q is not a boolean", HeaderRedelivery, redeliveryHeader)
		}
		if h != d.Redelivery {
			return fmt.Sprintf("Bad Request: %s header says %v, data.redelivery says %v", HeaderRedelivery, h, d.Redelivery)
		}
	}
	return ""
}

// performWebhook deduplicates or journals a valid delivery.
func (s *Server) performWebhook(req opRequest) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, ok := s.st.hooks[hookKey{req.receiver, req.key}]; ok {
		s.stats.Deduplicated++
		s.log.Debug("webhook deduplicated", "receiver", req.receiver, "webhook_id", req.key, "message_id", first)
		return http.StatusOK, webhookResponse{ID: first, Deduplicated: true}
	}
	seq := s.st.seq + 1
	e := Entry{
		Seq: seq, Op: OpSend, ChatID: req.chatID, MessageID: strconv.FormatInt(seq, 10),
		Text: req.text, IdempotencyKey: req.key, Redelivery: req.redelivery,
		At: s.clock.Now().UTC(), Profile: ProfileWebhook, Receiver: req.receiver,
	}
	if err := s.acceptLocked(e); err != nil {
		return errorBody(http.StatusInternalServerError, descServerError+": journal write failed")
	}
	return http.StatusOK, webhookResponse{ID: e.MessageID}
}

// refuseWebhook answers a delivery that failed the receiver's checks.
func (s *Server) refuseWebhook(w http.ResponseWriter, receiver string, status int, desc string) {
	s.log.Warn("webhook delivery refused", "receiver", receiver, "status", status, "reason", desc)
	writeError(w, status, desc)
}
