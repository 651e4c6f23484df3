// Package client is a small HTTP client for the CloudLab Portal REST API.
//
// It speaks JSON both ways, sends the API token only in the X-Api-Token header,
// follows redirects to the same host (the portal 307-redirects to trailing-slash
// paths) resending method and body, retries POSTs answered with 429 and GETs
// answered with 5xx, and turns error bodies into *APIError values.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// Config configures a Client.
type Config struct {
	BaseURL   string // e.g. https://boss.emulab.net:43794 (a path prefix is kept)
	Token     string // sent only as X-Api-Token
	Insecure  bool   // skip TLS verification (local portal with a self-signed certificate)
	UserAgent string
	// RetryBase is the first backoff step for 429 and 5xx retries (default 2s).
	RetryBase time.Duration
	// GetRetries bounds the retries of a GET answered with 5xx or a transport error (default 4).
	GetRetries int
	// PostRetries bounds 429 retries of a POST when the context has no deadline (default 10).
	PostRetries int
	HTTPClient  *http.Client
}

// Client talks to one portal with one token.
type Client struct {
	base        string
	token       string
	ua          string
	retryBase   time.Duration
	getRetries  int
	postRetries int
	hc          *http.Client
}

const maxRedirects = 5

// New checks the configuration and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Token == "" {
		return nil, errors.New("no CloudLab API token")
	}
	u, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("portal URL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.Insecure {
			tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // user asked for it
		}
		hc.Transport = tr
	}
	// Redirects are followed by hand: same host only (the token must not leak), method kept.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{base: u.String(), token: cfg.Token, ua: cfg.UserAgent, hc: hc,
		retryBase: cfg.RetryBase, getRetries: cfg.GetRetries, postRetries: cfg.PostRetries}
	if c.ua == "" {
		c.ua = "terraform-provider-cloudlab"
	}
	if c.retryBase <= 0 {
		c.retryBase = 2 * time.Second
	}
	if c.getRetries <= 0 {
		c.getRetries = 4
	}
	if c.postRetries <= 0 {
		c.postRetries = 10
	}
	return c, nil
}

// seg escapes one path segment but keeps the comma of `project,name` ids literal.
func seg(s string) string { return strings.ReplaceAll(url.PathEscape(s), "%2C", ",") }

// redact removes the token from any text that came back from the portal or a transport error.
func (c *Client) redact(s string) string {
	if c.token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.token, "<redacted>")
}

// do sends one API call; in (may be nil) is sent as JSON and out (may be nil) receives the body.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	ctx = tflog.MaskMessageStrings(ctx, c.token)
	ctx = tflog.MaskAllFieldValuesStrings(ctx, c.token)
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s %s: encoding request: %w", method, path, err)
		}
	}
	for attempt := 0; ; attempt++ {
		status, hdr, data, err := c.roundTrip(ctx, method, path, body)
		if err != nil {
			if method == http.MethodGet && attempt < c.getRetries && ctx.Err() == nil {
				tflog.Warn(ctx, "cloudlab: transport error, retrying", map[string]any{"path": path, "error": c.redact(err.Error())})
				if sleepBefore(ctx, c.backoff(attempt)) == nil {
					continue
				}
			}
			return errors.New(c.redact(fmt.Sprintf("cloudlab portal: %s %s: %v", method, path, err)))
		}
		tflog.Debug(ctx, "cloudlab: response", map[string]any{"method": method, "path": path, "status": status, "attempt": attempt})
		switch {
		case status == http.StatusTooManyRequests && method == http.MethodPost:
			wait := retryAfter(hdr.Get("Retry-After"), c.backoff(attempt))
			_, hasDeadline := ctx.Deadline()
			if !hasDeadline && attempt >= c.postRetries {
				return c.apiError(method, path, status, data)
			}
			tflog.Info(ctx, "cloudlab: portal busy (429), retrying", map[string]any{"path": path, "wait": wait.String()})
			if sleepBefore(ctx, wait) != nil {
				e := c.apiError(method, path, status, data)
				return fmt.Errorf("%w (portal busy; gave up retrying before the deadline)", e)
			}
			continue
		case status >= 500 && method == http.MethodGet && attempt < c.getRetries:
			tflog.Warn(ctx, "cloudlab: server error, retrying", map[string]any{"path": path, "status": status})
			if sleepBefore(ctx, c.backoff(attempt)) != nil {
				return c.apiError(method, path, status, data)
			}
			continue
		case status >= 400:
			return c.apiError(method, path, status, data)
		}
		if out == nil || status == http.StatusNoContent || len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("cloudlab portal: %s %s: HTTP %d: decoding response: %v", method, path, status, err)
		}
		return nil
	}
}

// roundTrip sends the request and follows same-host redirects, resending method and body.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) (int, http.Header, []byte, error) {
	target, err := url.Parse(c.base + path)
	if err != nil {
		return 0, nil, nil, err
	}
	for hop := 0; ; hop++ {
		req, err := http.NewRequestWithContext(ctx, method, target.String(), bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("X-Api-Token", c.token)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", c.ua)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if method == http.MethodGet {
			req.Header.Set("X-Api-Elaborate", "true") // expand children (aggregates, nodes)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return 0, nil, nil, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
		resp.Body.Close()
		if err != nil {
			return 0, nil, nil, err
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode > 399 || resp.StatusCode == 304 || loc == "" {
			return resp.StatusCode, resp.Header, data, nil
		}
		next, err := target.Parse(loc)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("bad redirect Location %q: %v", loc, err)
		}
		if next.Scheme != target.Scheme || next.Host != target.Host {
			return 0, nil, nil, fmt.Errorf("refusing redirect to another host %s (the API token is not sent there)", next.Host)
		}
		if hop >= maxRedirects {
			return 0, nil, nil, fmt.Errorf("too many redirects (last to %s)", next.Path)
		}
		tflog.Debug(ctx, "cloudlab: following redirect", map[string]any{"status": resp.StatusCode, "to": next.Path})
		target = next
	}
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.retryBase << min(attempt, 5)
	return min(d, 60*time.Second)
}

// retryAfter parses a Retry-After header (seconds or HTTP date); def when absent or bad.
func retryAfter(h string, def time.Duration) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return def
	}
	var secs int
	if _, err := fmt.Sscanf(h, "%d", &secs); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return def
}

// sleepBefore waits d, failing at once when the context would expire before that.
func sleepBefore(ctx context.Context, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return context.DeadlineExceeded
	}
	return sleep(ctx, d)
}

// sleep waits d or until the context is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
