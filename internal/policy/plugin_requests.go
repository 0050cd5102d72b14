package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// This file holds the table of requests waiting for the plugin: Check adds
// to it, answers (handleLine), timeouts (reap) and failures (failWhere)
// resolve its entries, each exactly once.

// req is one event waiting for the plugin.
type req struct {
	id       nostr.ID
	line     []byte
	done     func(Decision)
	deadline int64 // nanos since epoch
	gen      uint64
	sentAt   int64 // nanos since epoch; valid when gen != 0
	prev     *req
	next     *req
}

// Check submits ev to the plugin without blocking. If it returns nil, done
// is called exactly once with the decision, from a goroutine of the plugin
// (possibly before Check returns) or, for an event still waiting when the
// plugin closes, from the goroutine calling Close; done must not block
// (hand the result off) and must not call Close. If it returns a rejection
// ("rate-limited:" when PluginMaxInflight events are already waiting,
// "error:" after Close), done is never called. ev and meta are not retained
// beyond the request line built here.
func (p *Plugin) Check(ev *nostr.Event, meta Meta, done func(Decision)) *nostr.Rejection {
	line := appendRequest(make([]byte, 0, len(ev.Raw)+160), ev, meta)
	r := &req{id: ev.ID, line: line, done: done, deadline: p.since() + int64(p.timeout)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return rejPluginShutdown
	}
	if p.n >= p.maxInflight {
		p.mu.Unlock()
		p.refused.Add(1)
		return rejPluginBusy
	}
	first := p.head == nil
	if first {
		p.head = r
	} else {
		p.tail.next, r.prev = r, p.tail
	}
	p.tail = r
	if p.unsent == nil {
		p.unsent = r
	}
	p.byID[r.id] = append(p.byID[r.id], r)
	p.n++
	p.mu.Unlock()
	p.requests.Add(1)
	signal(p.sendSig)
	if first {
		signal(p.reapSig)
	}
	return nil
}

// unlink removes r from the pending structures. p.mu must be held.
func (p *Plugin) unlink(r *req) {
	if p.unsent == r {
		p.unsent = r.next
	}
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		p.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		p.tail = r.prev
	}
	r.prev, r.next = nil, nil
	list := p.byID[r.id]
	for i, x := range list {
		if x == r {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(p.byID, r.id)
	} else {
		p.byID[r.id] = list
	}
	p.n--
}

// failWhere rejects, with msg, every pending request for which match
// holds. p.mu must not be held.
func (p *Plugin) failWhere(match func(*req) bool, msg string) int {
	var out []*req
	p.mu.Lock()
	for r := p.head; r != nil; {
		next := r.next
		if match(r) {
			p.unlink(r)
			out = append(out, r)
		}
		r = next
	}
	p.mu.Unlock()
	if msg != msgShutdown {
		p.failed.Add(int64(len(out)))
	}
	for _, r := range out {
		r.done(Decision{Action: Reject, Msg: msg})
	}
	return len(out)
}

// handleLine resolves the request a line answers.
func (p *Plugin) handleLine(pr *proc, line []byte, long bool) {
	pr.lastAnswer.Store(p.since())
	var a answer
	var err error
	if long {
		err = fmt.Errorf("%w: line longer than 64 KiB", errAnswerSyntax)
	} else {
		a, err = parseAnswer(line)
	}
	var r *req
	p.mu.Lock()
	if err == nil || errors.Is(err, errAnswerAction) {
		for _, x := range p.byID[a.ID] {
			if x.gen == pr.gen {
				r = x
				break
			}
		}
		if r == nil {
			p.mu.Unlock()
			p.log.Debug("write policy plugin answered an event that is not waiting (late answer?)", "id", a.ID.Hex())
			return
		}
	} else {
		// No usable id: blame the oldest request this process has.
		for x := p.head; x != nil; x = x.next {
			if x.gen == pr.gen {
				r = x
				break
			}
		}
	}
	if r != nil {
		p.unlink(r)
	}
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("write policy plugin: malformed answer", "err", err, "line", truncate(line, 200))
		if r != nil {
			p.failed.Add(1)
			r.done(Decision{Action: Reject, Msg: msgMalformed})
		}
		return
	}
	pr.answered.Store(true)
	switch a.Action {
	case Accept:
		p.accepted.Add(1)
	case Reject:
		p.rejected.Add(1)
	case ShadowReject:
		p.shadow.Add(1)
	}
	r.done(Decision{Action: a.Action, Msg: a.Msg})
}

// reap rejects requests whose deadline has passed, and asks for a restart
// of the current process if it is stuck (see stuck).
func (p *Plugin) reap() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		now := p.since()
		var expired []*req
		p.mu.Lock()
		for p.head != nil && p.head.deadline <= now {
			r := p.head
			p.unlink(r)
			expired = append(expired, r)
		}
		var next int64 = -1
		if p.head != nil {
			next = p.head.deadline
		}
		cur := p.cur
		p.mu.Unlock()
		for _, r := range expired {
			if cur != nil && r.gen == cur.gen && p.stuck(cur.lastAnswer.Load(), r.sentAt, now) {
				select {
				case p.kick <- r.gen:
				default:
				}
			}
			p.timeouts.Add(1)
			r.done(Decision{Action: Reject, Msg: msgTimeout})
		}
		if next >= 0 {
			timer.Reset(time.Duration(next - now))
			select {
			case <-timer.C:
			case <-p.quit:
				return
			}
			continue
		}
		select {
		case <-p.reapSig:
		case <-p.quit:
			return
		}
	}
}

// stuck reports whether a process whose last output line (or start) was at
// lastAnswer is stuck, as seen at now when a request written to it at
// sentAt times out: it has written nothing since that request, nor for a
// whole timeout. The second condition spares a process that was handed a
// backlog when it started: the oldest requests of the backlog may time out
// before any process could have answered them.
func (p *Plugin) stuck(lastAnswer, sentAt, now int64) bool {
	return lastAnswer < sentAt && now-lastAnswer >= int64(p.timeout)
}
