package fakeserver

// Vocabulary layout of the simple tokenizer: a few special tokens, then
// words hashed into VocabSize − FirstWordToken ids.
const (
	VocabSize      = 50000
	FirstWordToken = 100
)

// Special tokens of the chat template.
const (
	tokenBOS       = 1
	tokenSystem    = 2
	tokenUser      = 3
	tokenAssistant = 4
	tokenTool      = 5
	tokenEnd       = 6
)

// Tokenize is the fake server's tokenizer: every run of non-space characters
// is one token, its id an FNV-1a hash of the word folded into the
// vocabulary. It is deterministic and allocation-light, and the render
// endpoints return exactly the ids the server hashes into its KV cache and
// its KV events, so the precise prefix path sees what the server holds.
func Tokenize(dst []uint32, text string) []uint32 {
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h, in := uint32(offset32), false
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			if in {
				dst = append(dst, FirstWordToken+h%(VocabSize-FirstWordToken))
				h, in = offset32, false
			}
			continue
		}
		h = (h ^ uint32(c)) * prime32
		in = true
	}
	if in {
		dst = append(dst, FirstWordToken+h%(VocabSize-FirstWordToken))
	}
	return dst
}

// Message is one chat message as the chat template sees it.
type Message struct {
	Role    string
	Content string
}

// RenderChat applies the fake chat template: BOS, then per message a role
// token, its content's tokens and an end token, then the assistant token
// that starts the reply.
func RenderChat(dst []uint32, msgs []Message) []uint32 {
	dst = append(dst, tokenBOS)
	for _, m := range msgs {
		dst = append(dst, roleToken(m.Role))
		dst = Tokenize(dst, m.Content)
		dst = append(dst, tokenEnd)
	}
	return append(dst, tokenAssistant)
}

func roleToken(role string) uint32 {
	switch role {
	case "system", "developer":
		return tokenSystem
	case "assistant":
		return tokenAssistant
	case "tool":
		return tokenTool
	}
	return tokenUser
}

// outputWords are the words the server "generates", in turn.
var outputWords = [...]string{"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "again"}

// outputText returns the text of output tokens [from, to).
func outputText(b []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		b = append(b, outputWords[i%len(outputWords)]...)
		b = append(b, ' ')
	}
	return b
}
