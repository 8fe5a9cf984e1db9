//go:build unix

package live

import "syscall"

// openNonblock keeps an open from waiting: a named pipe that takes the
// place of a policy file between the look's stat and its open would
// otherwise block it until a writer comes.
const openNonblock = syscall.O_NONBLOCK
