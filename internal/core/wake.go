package core

// Wake asks the scheduler (and every stream waiting in Due) to look for
// due work now. Stores that share state between hub instances call it when
// another instance made work due.
func (r *Relay) Wake() {
	r.wakeScheduler()
	r.wakeStreams()
}

// WakeStreams wakes every stream waiting in Due, without the scheduler:
// stores that share state between hub instances call it when another
// instance made work due that it claims itself (a poll here would find
// the lanes claimed).
func (r *Relay) WakeStreams() { r.wakeStreams() }

// wakeScheduler makes the scheduler look for due lanes now.
func (r *Relay) wakeScheduler() {
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

// maxDue bounds the receivers with a Due channel kept; past it they are
// all woken (a stream woken for nothing pulls once more).
const maxDue = 100000

// wakeStreams wakes every stream waiting in Due.
func (r *Relay) wakeStreams() {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	r.wakeAllLocked()
}

func (r *Relay) wakeAllLocked() {
	for _, ch := range r.due {
		close(ch)
	}
	clear(r.due)
}

// wakeStream wakes the streams of one receiver.
func (r *Relay) wakeStream(receiver string) {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	if ch, ok := r.due[receiver]; ok {
		close(ch)
		delete(r.due, receiver)
	}
}

// Due returns a channel that is closed when receiver may have new work (a
// message sent to it, its registration, a replay) or at the next Wake: a
// stream that found its queue empty waits on it. Call it before the pull
// whose emptiness it will wait on, so that no wake-up is missed.
func (r *Relay) Due(receiver string) <-chan struct{} {
	r.dueMu.Lock()
	defer r.dueMu.Unlock()
	ch, ok := r.due[receiver]
	if !ok {
		if len(r.due) >= maxDue {
			r.wakeAllLocked()
		}
		ch = make(chan struct{})
		r.due[receiver] = ch
	}
	return ch
}
