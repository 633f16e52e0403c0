package redis

import (
	"context"
	"net"
	"testing"

	"github.com/hc-middleware/redis-cluster-operator/redis/topology"
)

// A node no pod backs that every view reads live counts toward the cluster's size only if
// the operator can connect to it: a pod that just stopped leaves its node reading connected
// everywhere for seconds, and counting it read a deleted pod as a resize. The probe sends
// nothing, so a node met into the cluster by anyone who reaches the bus gets no credentials.
func TestProbeStrangersConnectsAndSendsNothing(t *testing.T) {
	live, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := live.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64)
		n, _ := c.Read(buf) // returns when the prober closes
		got <- buf[:n]
	}()
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().(*net.TCPAddr)
	gone.Close() // nothing listens there any more: a deleted pod's address

	node := func(id string, a *net.TCPAddr) topology.Node {
		return topology.Node{ID: id, IP: a.IP.String(), Port: a.Port, Connected: true, Master: true}
	}
	answered := probeStrangers(context.Background(), []topology.Node{
		node("live", live.Addr().(*net.TCPAddr)), node("gone", goneAddr), {ID: "noaddr"},
	})
	if !answered["live"] || answered["gone"] || answered["noaddr"] || len(answered) != 1 {
		t.Errorf("answered %v, want the live node only", answered)
	}
	if b := <-got; len(b) != 0 {
		t.Errorf("the probe sent %q to a node only gossip vouches for", b)
	}
}
