package platform

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"herald/internal/clock"
	"herald/internal/split"
	"herald/outbox"
)

// WebhookMaxBytes is the webhook text limit, in UTF-8 bytes: it keeps the
// whole signed payload under the 20 kB Standard Webhooks recommends
// (PLATFORMS.md) for ordinary text, with room for the JSON around it.
const WebhookMaxBytes = 16384

// WebhookEventType is the "type" of every webhook payload.
const WebhookEventType = "message.created"

// Header names of a webhook send. The webhook- ones are Standard Webhooks
// 1.0; HeaderRedelivery is herald's marker header (SPEC §2, "marker").
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
	HeaderRedelivery       = "herald-redelivery"
)

// secretPrefix marks a Standard Webhooks secret: base64 of the key follows.
const secretPrefix = "whsec_"

// Webhook is the webhook: platform, a Standard Webhooks 1.0 sender
// (github.com/standard-webhooks/standard-webhooks, spec/standard-webhooks.md).
//
// Each send is one POST of the JSON payload
//
//	{"type":"message.created","data":{"chat_id":"…","text":"…","part":0,"parts":1,
//	 "redelivery":false,"obligation_id":42}}
//
// (part is 0-based) with the headers
//
//	webhook-id:        Outgoing.DeliveryKey, the same on every retry of one
//	                   obligation: the receiver's idempotency key
//	webhook-timestamp: unix seconds, from the clock
//	webhook-signature: v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>,
//	                   one per secret, space-separated (secret rotation)
//	herald-redelivery: true | false
//
// A receiver that deduplicates on webhook-id shows exactly one copy.
type Webhook struct {
	target string   // the URL without its secret parameters
	host   string   // for error messages: the path may hold a token
	keys   [][]byte // HMAC keys, one signature each
	client *http.Client
	clock  clock.Clock
}

// NewWebhook returns a Webhook for rawURL, the part after "webhook:":
// https://host/path?secret=S. S is a Standard Webhooks secret (whsec_ and
// the base64 of the key) or, without that prefix, the key's raw bytes; it
// is percent-decoded, but a "+" stays a "+" because base64 is full of them.
// Repeating secret= signs with each key, for rotation. The secret
// parameters are not sent; any other query parameters are. http:// is
// refused except for loopback hosts, which tests use.
func NewWebhook(rawURL string, opts Options) (*Webhook, error) {
	u, err := parseURL("webhook", rawURL)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("webhook URL must be https (http:// is allowed only for loopback hosts, for tests), got host %q", u.Hostname())
		}
	default:
		return nil, fmt.Errorf("webhook URL scheme %q: want https", u.Scheme)
	}
	secrets, rest, err := takeParams(u.RawQuery, "secret")
	if err != nil {
		return nil, fmt.Errorf("webhook URL: %w", err)
	}
	if len(secrets) == 0 {
		return nil, errors.New("webhook URL has no secret (add ?secret=whsec_… as the receiver gave it; requests are signed with it)")
	}
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		k, err := webhookKey(s)
		if err != nil {
			label := "webhook secret"
			if len(secrets) > 1 {
				label += " " + strconv.Itoa(i+1)
			}
			return nil, fmt.Errorf("%s %w", label, err)
		}
		keys = append(keys, k)
	}
	u.RawQuery = rest
	return &Webhook{
		target: u.String(),
		host:   u.Host,
		keys:   keys,
		client: newHTTPClient(),
		clock:  clockOrReal(opts.Clock),
	}, nil
}

// webhookKey returns the HMAC key a secret stands for. Its errors read on
// from "webhook secret".
func webhookKey(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("is empty")
	}
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return []byte(s), nil
	}
	// Padding is optional in what operators paste.
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(b64)
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("is not valid base64 after %s: %w", secretPrefix, base64Error(err))
	case len(key) == 0:
		return nil, fmt.Errorf("holds no key after %s", secretPrefix)
	}
	return key, nil
}

// base64Error keeps only the position of a decoding error: the default
// message is fine, but keep it from ever quoting the secret.
func base64Error(err error) error {
	var ce base64.CorruptInputError
	if errors.As(err, &ce) {
		return fmt.Errorf("illegal data at byte %d", int64(ce))
	}
	return errors.New("illegal data")
}

// webhookPayload is the signed JSON body of a send.
type webhookPayload struct {
	Type string      `json:"type"`
	Data webhookData `json:"data"`
}

type webhookData struct {
	ChatID       string `json:"chat_id"`
	Text         string `json:"text"`
	Part         int    `json:"part"`
	Parts        int    `json:"parts"`
	Redelivery   bool   `json:"redelivery"`
	ObligationID int64  `json:"obligation_id"`
}

// webhookReply is what a receiver may answer; both fields are optional.
type webhookReply struct {
	ID        json.RawMessage `json:"id"`
	MessageID json.RawMessage `json:"message_id"`
}

// Send POSTs m, signed. The platform message id is the response's JSON "id"
// or "message_id" when it has one, else the webhook-id: receivers owe us no
// body, and the webhook-id is what they deduplicate on. A 2xx whose body
// was torn in transit is ambiguous: the receiver took it, but we cannot tell
// what it answered, and the retry is deduplicated by webhook-id anyway. A
// 410 Gone is permanent: the receiver asks us to stop.
func (w *Webhook) Send(ctx context.Context, m outbox.Outgoing) (string, error) {
	where := fmt.Sprintf("send to webhook %s chat %q", w.host, m.ChatID)
	if !validWebhookID(m.DeliveryKey) {
		return "", sendErr(outbox.ClassPermanent, where, "not sent: delivery key %q cannot be a webhook-id (want printable ASCII without spaces or \".\")", m.DeliveryKey)
	}
	body, err := jsonBody(webhookPayload{
		Type: WebhookEventType,
		Data: webhookData{
			ChatID: m.ChatID, Text: m.Text, Part: m.Part, Parts: m.Parts,
			Redelivery: m.Redelivery, ObligationID: m.ObligationID,
		},
	})
	if err != nil {
		return "", sendErr(outbox.ClassPermanent, where, "encode payload: %w", err)
	}
	ts := strconv.FormatInt(w.clock.Now().Unix(), 10)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "herald")
	h.Set(HeaderWebhookID, m.DeliveryKey)
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, w.sign(m.DeliveryKey, ts, body))
	h.Set(HeaderRedelivery, strconv.FormatBool(m.Redelivery))

	ex, err := post(ctx, w.client, where, w.target, h, body)
	if err != nil {
		return "", err
	}
	if !success(ex.status) {
		extra := ""
		if ex.status == http.StatusGone {
			extra = "the receiver asks to stop: per Standard Webhooks, 410 Gone disables the endpoint; remove or replace this webhook"
		}
		return "", failure(where, ex, w.clock.Now(), extra)
	}
	if ex.bodyErr != nil {
		return "", sendErr(outbox.ClassAmbiguous, where, "status %d, then the response was torn: %w", ex.status, ex.bodyErr)
	}
	var reply webhookReply
	if json.Unmarshal(ex.body, &reply) == nil {
		for _, raw := range []json.RawMessage{reply.ID, reply.MessageID} {
			if id := messageID(raw); id != "" {
				return id, nil
			}
		}
	}
	return m.DeliveryKey, nil
}

// validWebhookID reports whether id can go out as a webhook-id. Standard
// Webhooks forbids "." in it (it delimits the signed content, so an id with
// one would let "{id}.{ts}" be forged), and a header value cannot hold
// control characters — a key net/http refuses would fail before connecting,
// look retryable and be retried for ever.
func validWebhookID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '.' {
			return false
		}
	}
	return true
}

// sign returns the webhook-signature header value: one "v1,<base64>" per key.
func (w *Webhook) sign(id, ts string, body []byte) string {
	sigs := make([]string, 0, len(w.keys))
	for _, k := range w.keys {
		mac := hmac.New(sha256.New, k)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}

// Limit is WebhookMaxBytes UTF-8 bytes.
func (w *Webhook) Limit() split.Limit { return split.Limit{Max: WebhookMaxBytes, Unit: split.Bytes} }

// CloseIdleConnections closes the pooled connections that are idle.
func (w *Webhook) CloseIdleConnections() { w.client.CloseIdleConnections() }

// isLoopback reports whether host names this machine: "localhost" or a
// loopback IP literal. Other names are not resolved, so a name that merely
// resolves to 127.0.0.1 today does not qualify.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseURL parses the URL part of a kind: spec, requiring an absolute URL
// with a host and no fragment. Its errors never quote the URL's query.
func parseURL(kind, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%s URL is empty", kind)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s URL %q: %v", kind, Redact(raw), stripURL(err))
	}
	switch {
	case u.Scheme == "" || u.Opaque != "":
		return nil, fmt.Errorf("%s URL %q is not an absolute http(s) URL", kind, Redact(raw))
	case u.Host == "":
		return nil, fmt.Errorf("%s URL %q has no host", kind, Redact(raw))
	case u.Fragment != "" || strings.Contains(raw, "#"):
		// A "#" in an unescaped secret would silently cut it short.
		return nil, fmt.Errorf("%s URL has a fragment (#…); percent-encode a \"#\" in a parameter as %%23", kind)
	case u.User != nil:
		return nil, fmt.Errorf("%s URL %q must not carry user:password@; authenticate with the secret", kind, Redact(raw))
	}
	return u, nil
}

// takeParams removes every name= parameter from rawQuery and returns their
// values, percent-decoded with "+" kept literally, and the rest of the query
// as it was written.
func takeParams(rawQuery, name string) (values []string, rest string, err error) {
	var keep []string
	for _, kv := range strings.Split(rawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		key, kerr := url.QueryUnescape(k)
		if kerr != nil || key != name {
			keep = append(keep, kv)
			continue
		}
		val, verr := url.PathUnescape(v)
		if verr != nil {
			// Do not quote the bad escape: it is part of a secret.
			return nil, "", fmt.Errorf("parameter %s has a bad percent-escape", name)
		}
		values = append(values, val)
	}
	return values, strings.Join(keep, "&"), nil
}
