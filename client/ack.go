package client

import (
	"context"
	"sync"
	"time"
)

// maxAckBatch bounds the ids in one POST /atp/ack.
const maxAckBatch = 1000

// acker acknowledges handled stream messages in batches: whatever was
// handled while the previous acknowledgement was in flight goes in the
// next one, so a busy stream costs one ack request per batch, not per
// message. Ids whose acknowledgement fails are tried again; if they never
// get through, the hub delivers them again after the visibility timeout.
type acker struct {
	c     *Client
	agent string

	mu   sync.Mutex
	ids  []string
	kick chan struct{}
	done chan struct{}
}

// startAcker starts acknowledging for agent until ctx ends or flush.
func (c *Client) startAcker(ctx context.Context, agent string) *acker {
	a := &acker{c: c, agent: agent, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go a.run(ctx)
	return a
}

// add queues id for acknowledgement.
func (a *acker) add(id string) {
	a.mu.Lock()
	a.ids = append(a.ids, id)
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// flush stops the acker after one last attempt at what is queued.
func (a *acker) flush() {
	close(a.kick)
	<-a.done
}

func (a *acker) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(len(a.ids), maxAckBatch)
	ids := a.ids[:n:n]
	a.ids = a.ids[n:]
	return ids
}

// putBack returns ids that could not be acknowledged to the queue.
func (a *acker) putBack(ids []string) {
	a.mu.Lock()
	a.ids = append(ids, a.ids...)
	a.mu.Unlock()
}

func (a *acker) run(ctx context.Context) {
	defer close(a.done)
	delay := 50 * time.Millisecond
	for {
		_, open := <-a.kick
		for ids := a.take(); len(ids) > 0 && ctx.Err() == nil; ids = a.take() {
			if _, err := a.c.Ack(ctx, a.agent, ids...); err != nil {
				a.putBack(ids)
				if !open {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(delay):
				}
				delay = min(2*delay, 2*time.Second)
				continue
			}
			delay = 50 * time.Millisecond
		}
		if !open || ctx.Err() != nil {
			return
		}
	}
}
