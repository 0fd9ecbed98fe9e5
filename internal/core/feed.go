package core

import (
	"context"
	"slices"
	"sync"
	"time"
)

// maxFeedBacklog bounds the messages a feed holds that its stream has not
// taken yet. A stream that falls this far behind gets no more hand-offs:
// new messages wait in the store for its pulls, which read them in order.
const maxFeedBacklog = 1024

// A Feed hands the messages accepted for one receiver straight to a stream
// of that receiver held open on this instance. When the store can (see
// AcceptPuller), Send stores such a message already pulled, leased to the
// stream for the feed's visibility, and puts it on the feed instead of
// waking the stream to pull it: the store is spared the pull, and the
// message reaches the stream without a read. Like a pulled message it
// stays queued until acknowledged; if the stream ends before writing it
// out, it is pulled again when its lease runs out.
type Feed struct {
	receiver   string
	visibility time.Duration

	mu     sync.Mutex
	msgs   []*Message
	closed bool
	ready  chan struct{} // gets a token at each hand-off (one may outlive a Take)
	ended  chan struct{} // closed when a newer stream of the receiver takes the feed's place
}

// AttachAs opens, for p, a feed for a stream of receiver's queue whose
// pulls lease messages for visibility, when p may take the queue
// (QueueAccess, OpQueue). Detach it when the stream ends.
//
// A receiver holds at most Config.MaxStreams feeds on one instance: at that
// number, AttachAs ends the oldest (its Ended channel closes, and its stream
// should stop). Each stream costs a connection, a goroutine and a pull of
// the store a second; a client that reconnects without closing its old
// streams, or whose old connections died without a word (the hub learns of
// that only when a write fails), would otherwise pile them up. Ending the
// oldest rather than refusing the newest lets such a client back in at
// once. What the ended stream had not written out is pulled again when its
// lease runs out, as for any dropped stream.
func (r *Relay) AttachAs(ctx context.Context, p Principal, receiver string, visibility time.Duration) (*Feed, error) {
	if err := r.QueueAccess(ctx, p, receiver); err != nil {
		return nil, err
	}
	return r.attach(receiver, visibility), nil
}

// attach opens a feed (see AttachAs).
func (r *Relay) attach(receiver string, visibility time.Duration) *Feed {
	f := &Feed{receiver: receiver, visibility: visibility, ready: make(chan struct{}, 1), ended: make(chan struct{})}
	r.feedMu.Lock()
	fs := r.feeds[receiver]
	var oldest *Feed
	if r.cfg.MaxStreams > 0 && len(fs) >= r.cfg.MaxStreams {
		oldest = fs[0]
		fs = slices.Delete(fs, 0, 1)
	}
	r.feeds[receiver] = append(fs, f)
	r.feedMu.Unlock()
	if oldest != nil {
		oldest.close()
		close(oldest.ended)
	}
	return f
}

// Ended returns a channel that is closed when a newer stream of the same
// receiver has taken the feed's place (see AttachAs).
func (f *Feed) Ended() <-chan struct{} { return f.ended }

// Detach closes f: no message is handed to it after Detach returns, save
// one whose hand-off was already under way (it is pulled again when its
// lease runs out).
func (r *Relay) Detach(f *Feed) {
	r.feedMu.Lock()
	fs := slices.DeleteFunc(r.feeds[f.receiver], func(g *Feed) bool { return g == f })
	if len(fs) == 0 {
		delete(r.feeds, f.receiver)
	} else {
		r.feeds[f.receiver] = fs
	}
	r.feedMu.Unlock()
	f.close()
}

// close makes f take no more messages and drops those it holds.
func (f *Feed) close() {
	f.mu.Lock()
	f.closed = true
	f.msgs = nil
	f.mu.Unlock()
}

// feedFor returns a feed of receiver with room for a message, or nil.
func (r *Relay) feedFor(receiver string) *Feed {
	r.feedMu.Lock()
	defer r.feedMu.Unlock()
	for _, f := range r.feeds[receiver] {
		if f.room() {
			return f
		}
	}
	return nil
}

func (f *Feed) room() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.closed && len(f.msgs) < maxFeedBacklog
}

// put hands m to the stream; it reports false if the feed was closed.
func (f *Feed) put(m *Message) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.msgs = append(f.msgs, m)
	select {
	case f.ready <- struct{}{}:
	default:
	}
	return true
}

// Ready returns a channel that receives when messages wait to be taken.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Take returns the messages handed to the feed since the last Take, in the
// order they were handed over (a send's hand-off happens before it
// returns). Callers must not modify them.
func (f *Feed) Take() []*Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	ms := f.msgs
	f.msgs = nil
	return ms
}
