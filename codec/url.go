package codec

import "net/url"

// URL is a url.URL stored as its string form ("https://user@host/path?q").
//
// encoding/json has no string form for url.URL: it would write an object
// of its parts and drop the user info, so Register rejects url.URL
// attributes. Use URL (or *URL for an optional one) instead; its text is
// also its canonical key value.
type URL struct{ url.URL }

// ParseURL parses s into a URL.
func ParseURL(s string) (*URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	return &URL{URL: *u}, nil
}

// String returns the URL in its string form.
func (u URL) String() string { return u.URL.String() }

// MarshalText returns the URL's string form.
func (u URL) MarshalText() ([]byte, error) { return []byte(u.URL.String()), nil }

// UnmarshalText parses a URL string.
func (u *URL) UnmarshalText(text []byte) error {
	p, err := url.Parse(string(text))
	if err != nil {
		return err
	}
	u.URL = *p
	return nil
}
