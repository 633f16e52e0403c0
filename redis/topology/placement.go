package topology

import "sort"

// ChooseMasters picks `masters` member indexes to be masters. Members already holding
// slots are masters whatever the wish (fixed); the rest are taken from members that are
// not replicas, preferring the Kubernetes node with the fewest masters so far, then
// members that already have replicas, then the lowest ordinal, so the choice is the same
// on every re-run. It returns nil when there are not enough candidates.
func ChooseMasters(members []Member, fixed []int, replicas map[int]int, masters int) []int {
	chosen := map[int]bool{}
	perNode := map[string]int{}
	for _, i := range fixed {
		chosen[i] = true
		perNode[members[i].K8sNode]++
	}
	hasReplica := map[int]bool{}
	for _, m := range replicas {
		hasReplica[m] = true
	}
	for len(chosen) < masters {
		best := -1
		for i := range members {
			if chosen[i] || isKey(replicas, i) {
				continue
			}
			if best < 0 || betterMaster(members, perNode, hasReplica, i, best) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		chosen[best] = true
		perNode[members[best].K8sNode]++
	}
	out := make([]int, 0, len(chosen))
	for i := range chosen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

func betterMaster(members []Member, perNode map[string]int, hasReplica map[int]bool, a, b int) bool {
	na, nb := perNode[members[a].K8sNode], perNode[members[b].K8sNode]
	if na != nb {
		return na < nb
	}
	if hasReplica[a] != hasReplica[b] {
		return hasReplica[a]
	}
	return a < b
}

func isKey(m map[int]int, k int) bool {
	_, ok := m[k]
	return ok
}

// AssignReplicas returns replica index → master index for every member that is not a
// master. Links in `existing` to a chosen master are kept. Each master first gets
// replicasPerMaster replicas, on a different Kubernetes node whenever some assignment
// allows it (a bipartite matching, so an early greedy choice cannot strand a later
// replica on its master's node); members beyond that are spread over the masters with the
// fewest replicas, again preferring another node.
func AssignReplicas(members []Member, masters []int, existing map[int]int, replicasPerMaster int) map[int]int {
	isMaster := map[int]bool{}
	for _, m := range masters {
		isMaster[m] = true
	}
	out := map[int]int{}
	count := map[int]int{}
	for r, m := range existing {
		if isMaster[m] && !isMaster[r] {
			out[r] = m
			count[m]++
		}
	}
	var free []int
	for i := range members {
		if !isMaster[i] && !isKey(out, i) {
			free = append(free, i)
		}
	}
	// Quota seats: one per missing replica of each master, masters in ordinal order.
	var seats []int
	for _, m := range masters {
		for k := count[m]; k < replicasPerMaster; k++ {
			seats = append(seats, m)
		}
	}
	apart := func(r, m int) bool { return members[r].K8sNode != members[m].K8sNode }
	seatOf := matchApart(free, seats, apart)
	var rest []int
	taken := map[int]bool{}
	for _, r := range free {
		if s, ok := seatOf[r]; ok {
			out[r] = seats[s]
			count[seats[s]]++
			taken[s] = true
		} else {
			rest = append(rest, r)
		}
	}
	// Seats no apart replica could take go to the leftovers, same node or not.
	var left []int
	for _, r := range rest {
		placed := false
		for s := range seats {
			if !taken[s] {
				out[r], taken[s], placed = seats[s], true, true
				count[seats[s]]++
				break
			}
		}
		if !placed {
			left = append(left, r)
		}
	}
	placeExtras(left, masters, out, count, apart)
	return out
}

// placeExtras gives each member beyond the quota to the master with the fewest replicas,
// one on another node first among equals.
func placeExtras(left, masters []int, out, count map[int]int, apart func(r, m int) bool) {
	for _, r := range left {
		best := -1
		for _, m := range masters {
			if best < 0 || count[m] < count[best] ||
				count[m] == count[best] && apart(r, m) && !apart(r, best) {
				best = m
			}
		}
		if best >= 0 {
			out[r] = best
			count[best]++
		}
	}
}

// matchApart is Kuhn's augmenting-path matching of replicas to seats, with an edge only
// when ok(replica, seat's master). Replicas and seats are tried in order, so the result
// is deterministic.
func matchApart(replicas, seats []int, ok func(r, m int) bool) map[int]int {
	seatOwner := make([]int, len(seats))
	for i := range seatOwner {
		seatOwner[i] = -1
	}
	var try func(ri int, seen []bool) bool
	try = func(ri int, seen []bool) bool {
		// A free seat first, so replicas keep the natural order (replica k of master k)
		// whenever that is already apart; steal a seat only when none is free.
		for s, m := range seats {
			if !seen[s] && seatOwner[s] < 0 && ok(replicas[ri], m) {
				seen[s] = true
				seatOwner[s] = ri
				return true
			}
		}
		for s, m := range seats {
			if seen[s] || !ok(replicas[ri], m) {
				continue
			}
			seen[s] = true
			if seatOwner[s] < 0 || try(seatOwner[s], seen) {
				seatOwner[s] = ri
				return true
			}
		}
		return false
	}
	for ri := range replicas {
		try(ri, make([]bool, len(seats)))
	}
	out := map[int]int{}
	for s, ri := range seatOwner {
		if ri >= 0 {
			out[replicas[ri]] = s
		}
	}
	return out
}
