package shell_test

import "github.com/sourced-go/sourced/codec"

func errInvalid() error { return codec.ErrInvalid }
