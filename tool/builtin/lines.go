package builtin

import (
	"bufio"
	"bytes"
	"io"
)

// sniffLen is how much of a file is looked at to tell text from binary.
const sniffLen = 8000

// isBinary reports whether head, the start of a file, looks like binary
// content: it contains a NUL byte, as git and grep decide.
func isBinary(head []byte) bool { return bytes.IndexByte(head, 0) >= 0 }

// sniff returns whether the file read by br is binary, without consuming
// anything.
func sniff(br *bufio.Reader) (bool, error) {
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return false, err
	}
	return isBinary(head), nil
}

// readLine reads the next line from br, reusing buf, and returns it
// without its line ending. With keep > 0 it stops once it has keep bytes
// of the line, leaving the rest unread; with keep == 0 it consumes the
// whole line and returns none of it. n is the number of bytes consumed.
// readLine returns io.EOF when no line is left.
func readLine(br *bufio.Reader, buf []byte, keep int) (line []byte, n int, err error) {
	line = buf[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if room := keep - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if keep > 0 && len(line) >= keep {
			return line, n, nil
		}
		switch err {
		case bufio.ErrBufferFull:
			continue
		case nil:
		case io.EOF:
			if n == 0 {
				return line, 0, io.EOF
			}
		default:
			return line, n, err
		}
		if bytes.HasSuffix(line, []byte("\n")) {
			line = line[:len(line)-1]
			if bytes.HasSuffix(line, []byte("\r")) {
				line = line[:len(line)-1]
			}
		}
		return line, n, nil
	}
}
