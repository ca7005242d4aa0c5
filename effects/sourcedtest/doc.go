// Package sourcedtest forwards to the test kit's new home,
// github.com/sourced-go/sourced/shell/sourced/sourcedtest, beside the
// application package (shell/sourced) where users look for it. Every name
// here is an alias of, or a call to, the name of the same spelling there,
// so tests written against this package keep compiling and behave alike.
//
// Deprecated: import github.com/sourced-go/sourced/shell/sourced/sourcedtest.
// This package will be removed; it imports the kit under shell/, against the
// dependency arrows (effects must not import statechart nor shell), only to
// keep its users building meanwhile.
package sourcedtest
