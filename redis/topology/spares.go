package topology

// PlanSpareMoves re-homes surplus replicas to the serving masters short of replicas, so a
// cluster converges to replicasPerMaster replicas per master when the server itself moved
// one away. Valkey 8 and later replicate CLUSTER SETSLOT to the target's replicas: when
// the first SETSLOT NODE of a scale-out reaches the new master's replica before the new
// master's config epoch does, the old owners' gossip takes the slots back in the
// replica's view, its master owns nothing there, and (cluster-allow-replica-migration
// yes) it turns replica of an old master. That master then has a replica to spare and
// the new one none. The servers' own replica migration moves a replica only to a master
// flagged MIGRATE_TO, a flag a master loses with its last replica and regains only with
// its first slot, so whether they ever move it back depends on the order gossip arrived in.
//
// links is replica → master (member indexes) for every replica of a serving master,
// including those another part of the plan places in the same step; synced tells the
// replicas known to be in sync with their master (INFO replication). It returns replica →
// new master, only ever from a master holding more than replicasPerMaster replicas (and
// at least two: the only replica of a master is never touched) to one holding fewer, and
// only while the giver keeps a replica in sync, so its data stays in two copies. It never
// undoes a move the servers make (they move a replica only to a master with none) nor
// moves one back and forth: members beyond the quota stay where they are unless a master
// lacks one. Each seat of a master short of replicas, in ordinal order, takes the spare
// it likes best: on another Kubernetes node than that master, then one not in sync (its
// copy is no copy yet), then one on its own master's node (the worst placed), then the
// highest member index (the newest pod).
func PlanSpareMoves(members []Member, serving []int, links map[int]int, synced map[int]bool, replicasPerMaster int) map[int]int {
	seats, candidates := SpareCandidates(serving, links, replicasPerMaster)
	if len(candidates) == 0 {
		return nil
	}
	left, kept := map[int]int{}, map[int]int{} // per giver: replicas it may still give, in-sync ones it keeps
	for r, m := range links {
		left[m]++
		if synced[r] {
			kept[m]++
		}
	}
	for m, n := range left {
		left[m] = n - replicasPerMaster
	}
	moves := map[int]int{}
	for _, seat := range seats {
		best := -1
		for _, r := range candidates {
			m := links[r]
			if _, moved := moves[r]; moved || left[m] == 0 || kept[m]-b2i(synced[r]) < 1 {
				continue
			}
			if best < 0 || betterSpare(members, links, synced, seat, r, best) {
				best = r
			}
		}
		if best < 0 {
			break // no spare left: the masters keep what they have
		}
		moves[best] = seat
		left[links[best]]--
		if synced[best] {
			kept[links[best]]--
		}
	}
	return moves
}

// SpareCandidates are, when some serving master holds fewer than replicasPerMaster
// replicas, one seat per replica missing (masters in ordinal order) and the replicas
// PlanSpareMoves may take for them: every replica of a master holding more than
// replicasPerMaster, and at least two. Both are empty when no master lacks a replica.
func SpareCandidates(serving []int, links map[int]int, replicasPerMaster int) (seats, candidates []int) {
	count := map[int]int{}
	for _, m := range links {
		count[m]++
	}
	for _, m := range serving {
		for k := count[m]; k < replicasPerMaster; k++ {
			seats = append(seats, m)
		}
	}
	if len(seats) == 0 {
		return nil, nil
	}
	giver := map[int]bool{}
	for _, m := range serving {
		giver[m] = count[m] > replicasPerMaster && count[m] >= 2
	}
	for _, r := range sortedKeys(links) {
		if giver[links[r]] {
			candidates = append(candidates, r)
		}
	}
	return seats, candidates
}

// betterSpare reports whether replica a is a better one than b to move to master seat.
func betterSpare(members []Member, links map[int]int, synced map[int]bool, seat, a, b int) bool {
	apart := func(r, m int) bool { return members[r].K8sNode != members[m].K8sNode }
	if apart(a, seat) != apart(b, seat) {
		return apart(a, seat)
	}
	if synced[a] != synced[b] {
		return !synced[a]
	}
	if apart(a, links[a]) != apart(b, links[b]) {
		return !apart(a, links[a])
	}
	return a > b
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
