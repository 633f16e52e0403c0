package rdb

// Streams (types 15, 19 and 21): the listpacks of entries, the stream's metadata, then
// its consumer groups, each with its pending entries and its consumers.

func (p *parser) skipStream(t byte) error {
	nodes, err := p.plainLength()
	if err != nil {
		return err
	}
	if err := p.skipStrings(2 * nodes); err != nil { // master ID, listpack
		return err
	}
	// length, last ID (ms, seq); since LISTPACKS_2 first ID, max deleted ID, entries added.
	n := 3
	if t >= typeStreamLP2 {
		n += 5
	}
	if err := p.lengths(n); err != nil {
		return err
	}
	return p.each(func() error { return p.skipGroup(t) })
}

// skipGroup moves past one consumer group: its name, last delivered ID (and entries
// read, since LISTPACKS_2), its pending entries and its consumers.
func (p *parser) skipGroup(t byte) error {
	if _, err := p.str(false); err != nil { // name
		return err
	}
	n := 2 // last delivered ID
	if t >= typeStreamLP2 {
		n++ // entries read
	}
	if err := p.lengths(n); err != nil {
		return err
	}
	pending := func() error {
		if _, err := p.readFull(16 + 8); err != nil { // raw ID, delivery time
			return err
		}
		_, err := p.plainLength() // delivery count
		return err
	}
	if err := p.each(pending); err != nil {
		return err
	}
	return p.each(func() error { return p.skipConsumer(t) })
}

// skipConsumer moves past one consumer: its name, seen time (and active time, since
// LISTPACKS_3) and the raw IDs of its pending entries.
func (p *parser) skipConsumer(t byte) error {
	if _, err := p.str(false); err != nil {
		return err
	}
	times := 8 // seen time
	if t >= typeStreamLP3 {
		times += 8 // active time
	}
	if _, err := p.readFull(times); err != nil {
		return err
	}
	pending, err := p.plainLength()
	if err != nil {
		return err
	}
	_, err = p.readFull(16 * pending)
	return err
}
