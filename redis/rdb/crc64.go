package rdb

import "hash/crc64"

// jones is Redis' CRC64 (crc64.c: the Jones polynomial, reflected, no initial or final
// inversion), the checksum of RDB files and DUMP payloads.
var jones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// CRC64 continues Redis' CRC64 crc over b. hash/crc64 inverts before and after, which
// Redis does not; inverting around the call undoes it.
func CRC64(crc uint64, b []byte) uint64 {
	return ^crc64.Update(^crc, jones, b)
}
