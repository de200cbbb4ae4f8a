package parser

import "testing"

func TestParseRSeq(t *testing.T) {
	f := func(in string, want uint32, ok bool) {
		t.Helper()
		got, err := ParseRSeq([]byte(in))
		if (err == nil) != ok || got != want {
			t.Errorf("ParseRSeq(%q) = %d, %v; want %d ok=%v", in, got, err, want, ok)
		}
	}
	f("1", 1, true)
	f(" 4294967295 ", 4294967295, true)
	f("0", 0, false) // RFC 3262 7.1: 1 to 2**32-1
	f("4294967296", 0, false)
	f("", 0, false)
	f("12a", 0, false)
}

func TestParseRAck(t *testing.T) {
	f := func(in string, want RAck, ok bool) {
		t.Helper()
		got, err := ParseRAck([]byte(in))
		if (err == nil) != ok || got.RSeq != want.RSeq || got.CSeq != want.CSeq || got.Method != want.Method {
			t.Errorf("ParseRAck(%q) = %+v, %v; want %+v ok=%v", in, got, err, want, ok)
		}
	}
	f("776656 1 INVITE", RAck{RSeq: 776656, CSeq: 1, Method: MethodInvite}, true) // RFC 3262 7.2
	f("1  314159\tINVITE", RAck{RSeq: 1, CSeq: 314159, Method: MethodInvite}, true)
	f("0 1 INVITE", RAck{}, false)
	f("1 INVITE", RAck{}, false)
	f("1 2", RAck{}, false)
	f("x 2 INVITE", RAck{}, false)
}

func TestParseSessionExpires(t *testing.T) {
	f := func(in string, want SessionExpires, ok bool) {
		t.Helper()
		got, err := ParseSessionExpires([]byte(in))
		if (err == nil) != ok || ok && got != want {
			t.Errorf("ParseSessionExpires(%q) = %+v, %v; want %+v ok=%v", in, got, err, want, ok)
		}
	}
	f("1800", SessionExpires{Delta: 1800}, true)
	f("4000;refresher=uac", SessionExpires{Delta: 4000, Refresher: RefresherUAC}, true) // RFC 4028 4
	f("90 ; refresher=UAS", SessionExpires{Delta: 90, Refresher: RefresherUAS}, true)
	f("1800;foo=bar;refresher=uac", SessionExpires{Delta: 1800, Refresher: RefresherUAC}, true)
	f("1800;refresher=proxy", SessionExpires{}, false)
	f("1800;", SessionExpires{}, false)
	f("abc", SessionExpires{}, false)
	f("", SessionExpires{}, false)
	f("1800 refresher=uac", SessionExpires{}, false)
}

func TestParseMinSE(t *testing.T) {
	f := func(in string, want uint32, ok bool) {
		t.Helper()
		got, err := ParseMinSE([]byte(in))
		if (err == nil) != ok || got != want {
			t.Errorf("ParseMinSE(%q) = %d, %v; want %d ok=%v", in, got, err, want, ok)
		}
	}
	f("90", 90, true)
	f("120;x=y", 120, true)
	f("-1", 0, false)
	f("", 0, false)
}
