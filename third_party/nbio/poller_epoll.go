// Copyright 2020 lesismal. All rights reserved.
// Use of this source code is governed by an MIT-style
// license that can be found in the LICENSE file.

//go:build linux
// +build linux

package nbio

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/lesismal/nbio/logging"
)

const (
	// EPOLLLT .
	EPOLLLT = 0

	// EPOLLET .
	EPOLLET = 0x80000000

	// EPOLLONESHOT .
	EPOLLONESHOT = syscall.EPOLLONESHOT
)

const (
	epollEventsRead  = syscall.EPOLLPRI | syscall.EPOLLIN
	epollEventsWrite = syscall.EPOLLOUT
	epollEventsError = syscall.EPOLLERR | syscall.EPOLLHUP | syscall.EPOLLRDHUP
)

const (
	IPPROTO_TCP   = syscall.IPPROTO_TCP
	TCP_KEEPINTVL = syscall.TCP_KEEPINTVL
	TCP_KEEPIDLE  = syscall.TCP_KEEPIDLE
)

type poller struct {
	g *Engine // parent engine

	epfd  int // epoll fd
	evtfd int // event fd for trigger

	index int // poller index in engine

	pollType string // listener or io poller

	shutdown bool // state

	// whether poller is used for listener.
	isListener bool
	// listener.
	listener net.Listener
	// if poller is used as UnixConn listener,
	// store the addr and remove it when exit.
	unixSockAddr string

	ReadBuffer []byte // default reading buffer

	// closing holds the descriptors of connections closed while the
	// poller may hold events for them, for the poller to close between
	// two batches of events (petrel patch, see deferClose).
	closing closeQueue
}

// closeQueue is a poller's list of descriptors to close (petrel patch).
type closeQueue struct {
	mu    sync.Mutex
	fds   []int
	busy  bool // the poller is handling a batch of events: it closes fds after it
	ended bool // the poller's loop has ended: close at once
}

// add the connection to poller and handle its io events; a non-zero
// readDeadline is armed before the poller can read it (petrel patch).
//
//go:norace
func (p *poller) addConn(c *Conn, readDeadline time.Time) error {
	fd := c.fd
	if fd >= len(p.g.connsUnix) {
		err := fmt.Errorf("too many open files, fd[%d] >= MaxOpenFiles[%d]",
			fd,
			len(p.g.connsUnix),
		)
		_ = c.closeWithError(err)
		return err
	}
	// petrel patch: a connection is registered last, once its read
	// deadline is armed and only if nothing has closed it: registering
	// a closed descriptor would watch whatever reuses its number.
	c.mux.Lock()
	closed := c.closed
	if !closed {
		c.p = p
	}
	c.mux.Unlock()
	if closed {
		return net.ErrClosed
	}
	if c.typ != ConnTypeUDPServer {
		p.g.onOpen(c)
	} else {
		p.g.onUDPListen(c)
	}
	if !readDeadline.IsZero() {
		_ = c.SetReadDeadline(readDeadline)
	}
	c.mux.Lock()
	if c.closed { // by the OnOpen handler, or the deadline passed
		c.mux.Unlock()
		return net.ErrClosed
	}
	raceRelease(c) // petrel patch, see race.go
	p.g.connsUnix[fd] = c
	err := p.addRead(fd)
	c.mux.Unlock()
	if err != nil {
		p.g.connsUnix[fd] = nil
		_ = c.closeWithError(err)
	}
	return err
}

// add the connection to poller and handle its io events.
//
//go:norace
func (p *poller) addDialer(c *Conn) error {
	fd := c.fd
	if fd >= len(p.g.connsUnix) {
		err := fmt.Errorf("too many open files, fd[%d] >= MaxOpenFiles[%d]",
			fd,
			len(p.g.connsUnix),
		)
		_ = c.closeWithError(err)
		return err
	}
	c.p = p
	raceRelease(c) // petrel patch, see race.go
	p.g.connsUnix[fd] = c
	c.isWAdded = true
	err := p.addReadWrite(fd)
	if err != nil {
		p.g.connsUnix[fd] = nil
		_ = c.closeWithError(err)
	}
	return err
}

//go:norace
func (p *poller) getConn(fd int) *Conn {
	return p.g.connsUnix[fd]
}

//go:norace
func (p *poller) deleteConn(c *Conn) {
	if c == nil {
		return
	}
	fd := c.fd

	if c.typ != ConnTypeUDPClientFromRead {
		if c == p.g.connsUnix[fd] {
			p.g.connsUnix[fd] = nil
		}
		// p.deleteEvent(fd)
	}

	if c.typ != ConnTypeUDPServer {
		p.g.onClose(c, c.closeErr)
	}
}

//go:norace
func (p *poller) start() {
	defer p.g.Done()

	logging.Debug("NBIO[%v][%v_%v] start", p.g.Name, p.pollType, p.index)
	defer logging.Debug("NBIO[%v][%v_%v] stopped", p.g.Name, p.pollType, p.index)

	if p.isListener {
		p.acceptorLoop()
	} else {
		defer func() {
			p.endClosing()
			_ = syscall.Close(p.epfd)
			_ = syscall.Close(p.evtfd)
		}()
		p.readWriteLoop()
	}
}

//go:norace
func (p *poller) acceptorLoop() {
	if p.g.LockListener {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}

	// petrel patch: shutdown is not reset here. stop may have set it
	// before this goroutine ran (nbhttp stops the engine as soon as it
	// cannot listen), and the loop would then never end.
	for !p.shutdown {
		conn, err := p.listener.Accept()
		if err == nil {
			var c *Conn
			c, err = NBConn(conn)
			if err != nil {
				_ = conn.Close()
				continue
			}
			err = p.g.pollers[c.Hash()%len(p.g.pollers)].addConn(c, time.Time{})
			if err != nil {
				logging.Error("NBIO[%v][%v_%v] addConn [fd: %v] failed: %v",
					p.g.Name,
					p.pollType,
					p.index,
					c.fd,
					err,
				)
			}
		} else {
			var ne net.Error
			if ok := errors.As(err, &ne); ok && ne.Timeout() {
				logging.Error("NBIO[%v][%v_%v] Accept failed: timeout error, retrying...",
					p.g.Name,
					p.pollType,
					p.index,
				)
				time.Sleep(time.Second / 20)
			} else {
				if !p.shutdown {
					logging.Error("NBIO[%v][%v_%v] Accept failed: %v, exit...",
						p.g.Name,
						p.pollType,
						p.index,
						err,
					)
				}
				if p.g.onAcceptError != nil {
					p.g.onAcceptError(err)
				}
			}
		}
	}
}

//go:norace
func (p *poller) readWriteLoop() {
	if p.g.LockPoller {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}

	msec := -1
	events := make([]syscall.EpollEvent, 1024)

	if p.g.onRead == nil && p.g.EpollMod == EPOLLET {
		p.g.MaxConnReadTimesPerEventLoop = 1<<31 - 1
	}

	g := p.g
	// petrel patch: shutdown is not reset here. stop may have set it
	// before this goroutine ran (nbhttp stops the engine as soon as it
	// cannot listen), and the loop would then never end.
	isOneshot := g.isOneshot
	asyncReadEnabled := g.AsyncReadInPoller && (g.EpollMod == EPOLLET)
	w := newEpollWaiter(p.epfd)
	defer w.close()
	for !p.shutdown {
		n, err := w.wait(events, msec)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			logging.Error("NBIO[%v][%v_%v] EpollWait failed: %v, exit...",
				p.g.Name,
				p.pollType,
				p.index,
				err,
			)
			return
		}

		if n <= 0 {
			continue
		}

		p.beginBatch()
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			switch fd {
			case p.evtfd: // triggered by stop (exit event loop) or by deferClose
				var b [8]byte
				_, _ = syscall.Read(p.evtfd, b[:])

			default: // for socket connections
				c := p.getConn(fd)
				if c != nil {
					raceAcquire(c) // petrel patch, see race.go
					if ev.Events&epollEventsWrite != 0 {
						if c.onConnected == nil {
							_ = c.flush()
						} else {
							c.onConnected(c, nil)
							c.onConnected = nil
							c.resetRead()
						}
					}

					if ev.Events&epollEventsRead != 0 {
						if g.onRead == nil {
							if asyncReadEnabled {
								c.AsyncRead()
							} else {
								for i := 0; i < g.MaxConnReadTimesPerEventLoop; i++ {
									pbuf := g.borrow(c)
									bufLen := len(*pbuf)
									rc, n, err := c.ReadAndGetConn(pbuf)
									if n > 0 {
										*pbuf = (*pbuf)[:n]
										g.onDataPtr(rc, pbuf)
									}
									g.payback(c, pbuf)
									if errors.Is(err, syscall.EINTR) {
										continue
									}
									if errors.Is(err, syscall.EAGAIN) {
										break
									}
									if err != nil {
										_ = c.closeWithError(err)
										break
									}
									if n < bufLen {
										break
									}
								}
								if isOneshot {
									c.ResetPollerEvent()
								}
							}
						} else {
							g.onRead(c)
						}
					}

					if ev.Events&epollEventsError != 0 {
						_ = c.closeWithError(io.EOF)
						continue
					}
				}
			}
		}
		p.endBatch()
	}
}

// deferClose queues fd, the descriptor of a connection being closed, for
// the poller to close after the batch of events it is handling, or wakes
// it to close fd if it is waiting (petrel patch). It reports false, and
// the caller closes fd itself, once the poller's loop has ended.
//
// Closing the descriptor at once, as nbio did, frees its number while the
// poller may still hold events for it from the batch epoll_wait returned:
// a connection accepted meanwhile gets the same number, and the poller
// then hands it the old connection's events, a hang-up among them, which
// closes the new connection. The poller's own handling of a batch is the
// only moment it holds events, and it closes what is queued before it
// waits for the next batch.
//
//go:norace
func (p *poller) deferClose(fd int) bool {
	q := &p.closing
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false
	}
	q.fds = append(q.fds, fd)
	if !q.busy && len(q.fds) == 1 {
		// Waiting, or about to: wake it. Written under q.mu, so that the
		// eventfd is still open (endClosing sets ended first).
		n := uint64(1)
		_, _ = syscall.Write(p.evtfd, (*(*[8]byte)(unsafe.Pointer(&n)))[:])
	}
	return true
}

// beginBatch marks the poller as handling events (petrel patch).
//
//go:norace
func (p *poller) beginBatch() {
	p.closing.mu.Lock()
	p.closing.busy = true
	p.closing.mu.Unlock()
}

// endBatch closes the descriptors queued while the poller held events
// (petrel patch).
//
//go:norace
func (p *poller) endBatch() {
	q := &p.closing
	q.mu.Lock()
	fds := q.fds
	q.fds = nil
	q.busy = false
	q.mu.Unlock()
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

// endClosing closes what is queued when the poller's loop ends, after
// which connections close their descriptors themselves (petrel patch).
//
//go:norace
func (p *poller) endClosing() {
	q := &p.closing
	q.mu.Lock()
	fds := q.fds
	q.fds = nil
	q.ended = true
	q.mu.Unlock()
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

//go:norace
func (p *poller) stop() {
	logging.Debug("NBIO[%v][%v_%v] stop...", p.g.Name, p.pollType, p.index)
	p.shutdown = true
	if p.listener != nil {
		_ = p.listener.Close()
		if p.unixSockAddr != "" {
			_ = os.Remove(p.unixSockAddr)
		}
	} else {
		n := uint64(1)
		_, _ = syscall.Write(p.evtfd, (*(*[8]byte)(unsafe.Pointer(&n)))[:])
	}
}

//go:norace
func (p *poller) addRead(fd int) error {
	return p.setRead(syscall.EPOLL_CTL_ADD, fd)
}

//go:norace
func (p *poller) resetRead(fd int) error {
	return p.setRead(syscall.EPOLL_CTL_MOD, fd)
}

//go:norace
func (p *poller) setRead(op int, fd int) error {
	switch p.g.EpollMod {
	case EPOLLET:
		events := syscall.EPOLLERR |
			syscall.EPOLLHUP |
			syscall.EPOLLRDHUP |
			syscall.EPOLLPRI |
			syscall.EPOLLIN |
			EPOLLET |
			p.g.EPOLLONESHOT
		if p.g.EPOLLONESHOT != EPOLLONESHOT {
			if op == syscall.EPOLL_CTL_ADD {
				return syscall.EpollCtl(p.epfd, op, fd, &syscall.EpollEvent{
					Fd:     int32(fd),
					Events: events | syscall.EPOLLOUT,
				})
			}
			return nil
		}
		return syscall.EpollCtl(p.epfd, op, fd, &syscall.EpollEvent{
			Fd:     int32(fd),
			Events: events,
		})
	default:
		return syscall.EpollCtl(
			p.epfd,
			op,
			fd,
			&syscall.EpollEvent{
				Fd: int32(fd),
				Events: syscall.EPOLLERR |
					syscall.EPOLLHUP |
					syscall.EPOLLRDHUP |
					syscall.EPOLLPRI |
					syscall.EPOLLIN,
			},
		)
	}
}

//go:norace
func (p *poller) modWrite(fd int) error {
	return p.setReadWrite(syscall.EPOLL_CTL_MOD, fd)
}

//go:norace
func (p *poller) addReadWrite(fd int) error {
	return p.setReadWrite(syscall.EPOLL_CTL_ADD, fd)
}

//go:norace
func (p *poller) setReadWrite(op int, fd int) error {
	switch p.g.EpollMod {
	case EPOLLET:
		events := syscall.EPOLLERR |
			syscall.EPOLLHUP |
			syscall.EPOLLRDHUP |
			syscall.EPOLLPRI |
			syscall.EPOLLIN |
			syscall.EPOLLOUT |
			EPOLLET |
			p.g.EPOLLONESHOT
		if p.g.EPOLLONESHOT != EPOLLONESHOT {
			if op == syscall.EPOLL_CTL_ADD {
				return syscall.EpollCtl(p.epfd, op, fd, &syscall.EpollEvent{
					Fd:     int32(fd),
					Events: events,
				})
			}
			return nil
		}
		return syscall.EpollCtl(p.epfd, op, fd, &syscall.EpollEvent{
			Fd:     int32(fd),
			Events: events,
		})
	default:
		return syscall.EpollCtl(
			p.epfd, op, fd,
			&syscall.EpollEvent{
				Fd: int32(fd),
				Events: syscall.EPOLLERR |
					syscall.EPOLLHUP |
					syscall.EPOLLRDHUP |
					syscall.EPOLLPRI |
					syscall.EPOLLIN |
					syscall.EPOLLOUT,
			},
		)
	}
}

// func (p *poller) deleteEvent(fd int) error {
// 	return syscall.EpollCtl(
// 		p.epfd,
// 		syscall.EPOLL_CTL_DEL,
// 		fd,
// 		&syscall.EpollEvent{Fd: int32(fd)},
// 	)
// }

//go:norace
func newPoller(g *Engine, isListener bool, index int) (*poller, error) {
	if isListener {
		if len(g.Addrs) == 0 {
			panic("invalid listener num")
		}

		addr := g.Addrs[index%len(g.Addrs)]
		ln, err := g.Listen(g.Network, addr)
		if err != nil {
			return nil, err
		}

		p := &poller{
			g:          g,
			index:      index,
			listener:   ln,
			isListener: isListener,
			pollType:   "LISTENER",
		}
		if g.Network == "unix" {
			p.unixSockAddr = addr
		}

		return p, nil
	}

	// petrel patch: the epoll and event descriptors are close-on-exec (a
	// process the program starts must not hold them; see dupCloseOnExec).
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}

	r0, _, e0 := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e0 != 0 {
		_ = syscall.Close(fd)
		return nil, e0
	}

	err = syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, int(r0),
		&syscall.EpollEvent{Fd: int32(r0),
			Events: syscall.EPOLLIN,
		},
	)
	if err != nil {
		_ = syscall.Close(fd)
		_ = syscall.Close(int(r0))
		return nil, err
	}

	p := &poller{
		g:          g,
		epfd:       fd,
		evtfd:      int(r0),
		index:      index,
		isListener: isListener,
		pollType:   "POLLER",
	}

	return p, nil
}

//go:norace
func (c *Conn) ResetPollerEvent() {
	p := c.p
	g := p.g
	fd := c.fd
	if g.isOneshot && !c.closed {
		if len(c.writeList) == 0 {
			_ = p.resetRead(fd)
		} else {
			_ = p.modWrite(fd)
		}
	}
}

// epollWaiter waits for the poller's epoll instance to have events without
// blocking a thread in epoll_wait (petrel patch, see PATCHES.md): the
// epoll fd is itself pollable, so a dup of it is registered with the Go
// runtime's netpoller and the poller goroutine parks there, holding no P
// in a system call, when epoll_wait(0) finds nothing. A goroutine blocked
// in epoll_wait keeps its P until the runtime's monitor takes it back
// (checking every 20 us while any P sits in a system call), and on a busy
// one-CPU host those wakeups and hand-offs cost a tenth of the CPU.
type epollWaiter struct {
	epfd int
	f    *os.File
	rc   syscall.RawConn
}

func newEpollWaiter(epfd int) *epollWaiter {
	w := &epollWaiter{epfd: epfd}
	fd, err := dupCloseOnExec(epfd) // petrel patch: close-on-exec
	if err != nil {
		return w
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return w
	}
	w.f = os.NewFile(uintptr(fd), "epoll")
	rc, err := w.f.SyscallConn()
	if err != nil {
		return w
	}
	w.rc = rc
	return w
}

// wait returns the pending events, waiting for some if there are none
// (msec < 0: without a time limit; otherwise epoll_wait's own wait).
func (w *epollWaiter) wait(events []syscall.EpollEvent, msec int) (int, error) {
	if w.rc == nil || msec >= 0 {
		return syscall.EpollWait(w.epfd, events, msec)
	}
	var n int
	var werr error
	err := w.rc.Read(func(uintptr) bool {
		n, werr = syscall.EpollWait(w.epfd, events, 0)
		if errors.Is(werr, syscall.EINTR) {
			n, werr = 0, nil
		}
		return n > 0 || werr != nil
	})
	if err != nil {
		// The netpoller refused the fd (it is not pollable here):
		// block in epoll_wait as before.
		w.rc = nil
		return syscall.EpollWait(w.epfd, events, msec)
	}
	return n, werr
}

func (w *epollWaiter) close() {
	if w.f != nil {
		_ = w.f.Close()
	}
}
