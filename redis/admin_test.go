package redis

import "testing"

func TestFactoryRetainClosesOtherAddresses(t *testing.T) {
	f := NewFactory(Options{}).(*factory)
	defer f.Close()
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		f.For(addr)
	}
	f.Retain([]string{"127.0.0.1:2"})
	if len(f.clients) != 1 || f.clients["127.0.0.1:2"] == nil {
		t.Fatalf("after Retain the factory holds %v, want only 127.0.0.1:2", f.clients)
	}
	f.Retain(nil)
	if len(f.clients) != 0 {
		t.Fatalf("after Retain(nil) the factory holds %d clients, want none", len(f.clients))
	}
}
