package dashboard

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/core"
	"github.com/switchboard-hub/switchboard/internal/httperr"
)

// FlowStore is what the dashboard's charts read: the flow of the stored
// messages over time (both stores implement it), so every hub on one
// store draws the same history, from before it started.
type FlowStore interface {
	MessageFlow(ctx context.Context, q core.FlowQuery) ([]core.FlowBucket, error)
}

// Bounds of the charts' window (?window=).
const (
	defaultWindow = time.Hour
	minWindow     = time.Minute
	maxWindow     = 24 * time.Hour
	// maxChartBuckets bounds the buckets of one window: the bucket is the
	// narrowest of bucketWidths that keeps the window within it.
	maxChartBuckets = 120
)

// bucketWidths are the bucket widths a window may get, narrowest first.
var bucketWidths = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
	5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour}

// flowQuery is the query of the window that ends at now: whole buckets,
// aligned to the bucket width (so every hub cuts the same buckets), the
// last one holding now.
func flowQuery(window time.Duration, now time.Time) core.FlowQuery {
	width := bucketWidths[len(bucketWidths)-1]
	for _, w := range bucketWidths {
		if window <= w*maxChartBuckets {
			width = w
			break
		}
	}
	n := int((window + width - 1) / width)
	end := now.Truncate(width).Add(width)
	return core.FlowQuery{Since: end.Add(-time.Duration(n) * width), Width: width, Buckets: n}
}

// statsAPI serves GET /dashboard/api/stats (?window=, a duration from 1m
// to 24h [1h]): the flow of the stored messages in buckets, oldest first.
func (d *Dashboard) statsAPI(w http.ResponseWriter, r *http.Request) error {
	window := defaultWindow
	if v := r.URL.Query().Get("window"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil || window < minWindow || window > maxWindow {
			return httperr.New(http.StatusBadRequest, httperr.CodeInvalidField, "window must be a duration from %s to %s, such as 15m, 1h or 24h", "1m", "24h")
		}
	}
	if d.opt.Flow == nil {
		return httperr.New(http.StatusNotImplemented, httperr.CodeInternal, "this store cannot read the message flow")
	}
	now := d.relay.Clock().Now()
	q := flowQuery(window, now)
	buckets, err := d.flow.get(r.Context(), d.opt.Flow, now, q)
	if err != nil {
		return err
	}
	httperr.JSON(w, http.StatusOK, map[string]any{"window": shortDuration(window), "bucket_s": q.Width.Seconds(),
		"since": q.Since, "until": q.Until(), "now": now, "buckets": buckets,
		"note": "from the stored messages, the same on every hub of this store; delivered and dead letters are kept " +
			shortDuration(d.relay.Config().Retention) + " after they end"})
	return nil
}

// shortDuration is d as time.Duration writes it without zero minutes and
// seconds at its end: 15m, 24h, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
