package topology

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRedirects sums the counts of errorstat_MOVED and errorstat_ASK ("errorstat_MOVED:count=12")
// of INFO errorstats: how many clients a node has sent elsewhere since it started.
func ParseRedirects(text string) (int64, error) {
	var n int64
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "errorstat_MOVED" && name != "errorstat_ASK") {
			continue
		}
		for _, field := range strings.Split(value, ",") {
			if c, ok := strings.CutPrefix(field, "count="); ok {
				v, err := strconv.ParseInt(c, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("failed to parse %q: %w", line, err)
				}
				n += v
			}
		}
	}
	return n, nil
}
