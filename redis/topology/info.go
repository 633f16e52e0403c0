package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// ClusterInfo is the part of CLUSTER INFO the operator reads.
type ClusterInfo struct {
	// State is "ok" or "fail".
	State         string
	SlotsAssigned int
	SlotsOK       int
	SlotsPFail    int
	SlotsFail     int
	KnownNodes    int
	// Size is the number of masters serving at least one slot.
	Size         int
	CurrentEpoch uint64
	MyEpoch      uint64
	// Fields holds every key of the reply, so new ones can be read without a parser change.
	Fields map[string]string
}

// OK reports cluster_state:ok.
func (c ClusterInfo) OK() bool { return c.State == "ok" }

// ParseClusterInfo parses the "key:value" lines of CLUSTER INFO. Unknown keys are kept in
// Fields; a known key with a non-numeric value is an error.
func ParseClusterInfo(text string) (ClusterInfo, error) {
	info := ClusterInfo{Fields: map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return ClusterInfo{}, fmt.Errorf("failed to parse CLUSTER INFO line %q: no colon", line)
		}
		info.Fields[key] = value
		if err := info.set(key, value); err != nil {
			return ClusterInfo{}, fmt.Errorf("failed to parse CLUSTER INFO %s: %w", key, err)
		}
	}
	if info.State == "" {
		return ClusterInfo{}, fmt.Errorf("failed to parse CLUSTER INFO: no cluster_state")
	}
	return info, nil
}

func (c *ClusterInfo) set(key, value string) error {
	ints := map[string]*int{
		"cluster_slots_assigned": &c.SlotsAssigned,
		"cluster_slots_ok":       &c.SlotsOK,
		"cluster_slots_pfail":    &c.SlotsPFail,
		"cluster_slots_fail":     &c.SlotsFail,
		"cluster_known_nodes":    &c.KnownNodes,
		"cluster_size":           &c.Size,
	}
	epochs := map[string]*uint64{
		"cluster_current_epoch": &c.CurrentEpoch,
		"cluster_my_epoch":      &c.MyEpoch,
	}
	switch {
	case key == "cluster_state":
		c.State = value
	case ints[key] != nil:
		n, err := strconv.Atoi(value)
		if err != nil {
			return err
		}
		*ints[key] = n
	case epochs[key] != nil:
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return err
		}
		*epochs[key] = n
	}
	return nil
}
