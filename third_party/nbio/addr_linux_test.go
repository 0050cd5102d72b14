package nbio

import (
	"net"
	"testing"
)

// TestCompactAddresses: connections taken over from one listener share
// one local address, and keep a copy of the remote address of their own
// (an IPv4 address in 4 bytes), not the net package's, whose IP slice
// keeps the whole syscall.Sockaddr it was read from alive. Both read as
// the net package's do.
func TestCompactAddresses(t *testing.T) {
	f := func(network, addr string) {
		t.Helper()
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("no %s listener on %s, not checked: %v", network, addr, err)
			return
		}
		defer ln.Close()
		var locals []net.Addr
		for i := 0; i < 3; i++ {
			client, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			std, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			stdLocal, stdRemote := std.LocalAddr().(*net.TCPAddr), std.RemoteAddr().(*net.TCPAddr)
			c, err := NBConn(std)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
			if local.String() != stdLocal.String() || remote.String() != stdRemote.String() {
				t.Fatalf("%s: addresses %s %s, want %s %s", network, local, remote, stdLocal, stdRemote)
			}
			if &remote.IP[0] == &stdRemote.IP[0] {
				t.Fatalf("%s: the remote address is the net package's", network)
			}
			if ip4 := stdRemote.IP.To4(); ip4 != nil && len(remote.IP) != 4 {
				t.Fatalf("%s: IPv4 remote address in %d bytes", network, len(remote.IP))
			}
			locals = append(locals, local)
		}
		for _, l := range locals[1:] {
			if l != locals[0] {
				t.Fatalf("%s: connections of one listener have local addresses of their own", network)
			}
		}
	}
	f("tcp4", "127.0.0.1:0")
	f("tcp6", "[::1]:0")
}
