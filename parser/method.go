package parser

// Method identifies a request method. Methods are case-sensitive
// (RFC 3261 7.1): "invite" is an extension method, not INVITE.
type Method uint8

// Known methods; MethodOther is any extension method (see Message.MethodBytes).
const (
	MethodOther Method = iota
	MethodInvite
	MethodAck
	MethodBye
	MethodCancel
	MethodOptions
	MethodRegister
	MethodPrack
	MethodSubscribe
	MethodNotify
	MethodPublish
	MethodInfo
	MethodRefer
	MethodMessage
	MethodUpdate
	NumMethods // one more than the largest Method, for arrays indexed by Method
)

var methodNames = [NumMethods]string{
	MethodOther:     "",
	MethodInvite:    "INVITE",
	MethodAck:       "ACK",
	MethodBye:       "BYE",
	MethodCancel:    "CANCEL",
	MethodOptions:   "OPTIONS",
	MethodRegister:  "REGISTER",
	MethodPrack:     "PRACK",
	MethodSubscribe: "SUBSCRIBE",
	MethodNotify:    "NOTIFY",
	MethodPublish:   "PUBLISH",
	MethodInfo:      "INFO",
	MethodRefer:     "REFER",
	MethodMessage:   "MESSAGE",
	MethodUpdate:    "UPDATE",
}

// String returns the method name, or "" for MethodOther.
func (m Method) String() string { return methodNames[m] }

// LookupMethod returns the Method for a method token (case-sensitive).
func LookupMethod(b []byte) Method {
	if len(b) < 3 {
		return MethodOther
	}
	// Dispatch on the first byte and length so a lookup is one string compare.
	var m Method
	switch b[0] {
	case 'I':
		if len(b) == 6 {
			m = MethodInvite
		} else {
			m = MethodInfo
		}
	case 'A':
		m = MethodAck
	case 'B':
		m = MethodBye
	case 'C':
		m = MethodCancel
	case 'O':
		m = MethodOptions
	case 'R':
		if len(b) == 8 {
			m = MethodRegister
		} else {
			m = MethodRefer
		}
	case 'P':
		if len(b) == 5 {
			m = MethodPrack
		} else {
			m = MethodPublish
		}
	case 'S':
		m = MethodSubscribe
	case 'N':
		m = MethodNotify
	case 'M':
		m = MethodMessage
	case 'U':
		m = MethodUpdate
	default:
		return MethodOther
	}
	if string(b) == methodNames[m] {
		return m
	}
	return MethodOther
}
