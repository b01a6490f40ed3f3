package ui

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/timerq/timerq/queue"
)

// quarantineRow is one quarantined record as the quarantine page shows it.
type quarantineRow struct {
	ID            string
	Shard         int
	QuarantinedAt time.Time
	DueScore      string
	Reason        string
	// Raw is the record Go-quoted, so that any bytes show as text, cut
	// at maxRawPreview bytes; Size is its length.
	Raw  string
	Size int
}

type quarantineData struct {
	Now     time.Time
	Rows    []quarantineRow
	Sharded bool
}

// maxRawPreview bounds the bytes of a quarantined record the page shows.
const maxRawPreview = 120

// quarantine lists the records claims moved aside because timerq cannot
// fire them (queue.Quarantine.List). It only reads; `timerctl quarantine
// drop` deletes one.
func (h *Handler) quarantine(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	recs, err := h.q.Quarantine().List(ctx)
	if h.failed(w, r, err) {
		return
	}
	d := quarantineData{Now: time.Now()}
	for _, q := range recs {
		d.Rows = append(d.Rows, toQuarantineRow(q))
	}
	shards, _ := h.q.Inspect().Shards(ctx) // read by Quarantine
	d.Sharded = shards > 1
	h.render(w, r, http.StatusOK, "quarantine", "Quarantine", d)
}

func toQuarantineRow(q queue.QuarantinedRecord) quarantineRow {
	raw := q.Raw
	if len(raw) > maxRawPreview {
		raw = raw[:maxRawPreview]
	}
	preview := strconv.Quote(string(raw))
	if len(q.Raw) > maxRawPreview {
		preview += "…"
	}
	return quarantineRow{ID: q.ID, Shard: q.Shard, QuarantinedAt: q.QuarantinedAt, DueScore: q.DueScore,
		Reason: q.Reason, Raw: preview, Size: len(q.Raw)}
}
