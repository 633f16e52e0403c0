package rdb

import (
	"encoding/binary"
	"hash/crc64"
)

// jones is Redis' CRC64 (crc64.c: the Jones polynomial, reflected, no initial or final
// inversion), the checksum of RDB files and DUMP payloads, a table per byte of an 8-byte
// word (slicing by 8, as Redis' own crc64 does). hash/crc64 is not used for the update:
// for a slice of 64 bytes or more it compares its argument's table with its own built-in
// ones (4 KB compared, at every call) and, from 2 KB, builds the 8 tables anew (16 KB)
// at every call; the reader calls it for every field of every key.
var jones = func() (t [8][256]uint64) {
	t[0] = *crc64.MakeTable(0x95ac9329ac4bc9b5)
	for i := 0; i < 256; i++ {
		crc := t[0][i]
		for k := 1; k < 8; k++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[k][i] = crc
		}
	}
	return t
}()

// CRC64 continues Redis' CRC64 crc over b.
func CRC64(crc uint64, b []byte) uint64 {
	for len(b) >= 8 {
		crc ^= binary.LittleEndian.Uint64(b)
		crc = jones[7][crc&0xff] ^ jones[6][crc>>8&0xff] ^ jones[5][crc>>16&0xff] ^ jones[4][crc>>24&0xff] ^
			jones[3][crc>>32&0xff] ^ jones[2][crc>>40&0xff] ^ jones[1][crc>>48&0xff] ^ jones[0][crc>>56]
		b = b[8:]
	}
	for _, v := range b {
		crc = jones[0][byte(crc)^v] ^ crc>>8
	}
	return crc
}
