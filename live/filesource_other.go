//go:build !unix

package live

// openNonblock is a flag of open on Unix only; elsewhere a policy file is
// opened as is.
const openNonblock = 0
