package core_test

import (
	"testing"

	"github.com/sourced-go/sourced/core"
)

func TestNormalizeGroup(t *testing.T) {
	cases := map[string]string{
		"CrossPost::Connections::LinkedIn": "cross_post.connections.linked_in",
		"courses.course_decider":           "courses.course_decider",
		"CourseApp::CourseDecider":         "course_app.course_decider",
		"HTTPServer":                       "http_server",
		"shop/orders":                      "shop.orders",
		"Orders2Go":                        "orders2_go",
		"order-machine":                    "order_machine",
		"Shop.CartV2":                      "shop.cart_v2",
	}
	for in, want := range cases {
		got, err := core.NormalizeGroup(in)
		if err != nil || got != want {
			t.Errorf("NormalizeGroup(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "  ", "a..b", "a::", "has space", "emoji😀"} {
		if got, err := core.NormalizeGroup(bad); err == nil {
			t.Errorf("NormalizeGroup(%q) = %q, want an error", bad, got)
		}
	}
}
