// Package layering holds the test of the root module's dependency
// arrows: codec <- core <- effects <- statechart <- shell, each layer
// importing only the layers below it, and the store contract
// (shell/driver) importing nothing of the shell it sits under. It has no
// code of its own.
package layering
