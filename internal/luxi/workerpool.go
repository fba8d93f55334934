package luxi

import (
	"sync"
	"time"
)

// Worker pool tuning: see workerPool.
const (
	workerIdle     = time.Second
	maxIdleWorkers = 1024
)

// workerPool runs connections' calls on goroutines that outlive a call.
// A goroutine's stack starts small and grows, by copying, to what a call
// needs; a fresh goroutine per call would pay that growth on every call.
// Workers that finish park here, most recent last, and the next
// connection with work takes the most recently parked one, whose stack
// is grown and warm. Workers idle for between one and two idle periods
// exit, so idle connections still cost no goroutine beyond their reader
// once traffic stops. The zero value is ready to use.
type workerPool struct {
	idleFor time.Duration // default workerIdle
	maxIdle int           // default maxIdleWorkers

	mu      sync.Mutex
	idle    []*worker // parked, in the order they parked
	epoch   uint64    // ticks of the idle timer so far
	timer   *time.Timer
	ticking bool
	closed  bool
	spawned int            // workers ever started
	exited  int            // workers that have exited
	wg      sync.WaitGroup // workers alive
}

// drainer is work for the pool: a connection with queued calls.
type drainer interface{ drain() }

type worker struct {
	next  chan drainer // capacity 1: whoever takes the worker off idle sends once (nil: exit)
	epoch uint64       // the pool's epoch when it parked
}

// run has d drained on a parked worker, or on a new one if none is
// parked. It must not be called after close.
func (p *workerPool) run(d drainer) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.next <- d
		return
	}
	p.spawned++
	p.wg.Add(1)
	p.mu.Unlock()
	go p.loop(&worker{next: make(chan drainer, 1)}, d)
}

func (p *workerPool) loop(w *worker, d drainer) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		p.exited++
		p.mu.Unlock()
	}()
	for d != nil {
		d.drain()
		if !p.park(w) {
			return
		}
		d = <-w.next
	}
}

// park puts w on the idle list, or reports false if it should exit.
func (p *workerPool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	maxIdle := p.maxIdle
	if maxIdle == 0 {
		maxIdle = maxIdleWorkers
	}
	if p.closed || len(p.idle) >= maxIdle {
		return false
	}
	w.epoch = p.epoch
	p.idle = append(p.idle, w)
	if !p.ticking {
		p.ticking = true
		if p.timer == nil {
			p.timer = time.AfterFunc(p.period(), p.tick)
		} else {
			p.timer.Reset(p.period())
		}
	}
	return true
}

func (p *workerPool) period() time.Duration {
	if p.idleFor > 0 {
		return p.idleFor
	}
	return workerIdle
}

// tick retires the workers that have been parked since before the
// previous tick, and keeps ticking while any remain parked. One timer for
// the pool, rather than one per worker, keeps timers off the call path.
func (p *workerPool) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.epoch++
	n := 0
	// idle is in parking order, so epochs never decrease along it.
	for n < len(p.idle) && p.idle[n].epoch+2 <= p.epoch {
		p.idle[n].next <- nil
		n++
	}
	if n > 0 {
		k := copy(p.idle, p.idle[n:])
		clear(p.idle[k:])
		p.idle = p.idle[:k]
	}
	if len(p.idle) > 0 && !p.closed {
		p.timer.Reset(p.period())
	} else {
		p.ticking = false
	}
}

// stats reports the workers parked and ever started.
func (p *workerPool) stats() (idle, spawned int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), p.spawned
}

// alive reports the workers started and not yet exited.
func (p *workerPool) alive() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spawned - p.exited
}

// close retires the parked workers and waits for every worker to exit.
// Callers first make sure nothing is left to call run.
func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.idle {
		w.next <- nil
	}
	p.idle = nil
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
