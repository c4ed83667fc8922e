package redis

import "strings"

// Slots is the number of hash slots of Redis Cluster.
const Slots = 16384

// Slot returns the Redis Cluster hash slot of key, as the server computes it
// (CLUSTER KEYSLOT): CRC16 (XMODEM) modulo Slots of the key's hash tag, the
// bytes between the first '{' and the first '}' after it, if that is not
// empty; else of the whole key.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16Table is the table of CRC16-CCITT (XMODEM: polynomial 0x1021, initial
// value 0), the checksum Redis Cluster hashes keys with.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crc16Table[byte(c>>8)^s[i]]
	}
	return c
}
