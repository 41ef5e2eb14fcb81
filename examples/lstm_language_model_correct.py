"""A word-level LSTM language model trained with truncated BPTT -- correctly.

The state is carried across batches (the model keeps its context) and cut at
every batch boundary with `detach_state` (gradients stop at the boundary), the
idiom of pytorch/examples' word_language_model. gradguard stays silent.
"""
import torch
from torch import nn


class LSTMLanguageModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=32, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def detach_state(state):
    """Keep the values, drop the history."""
    if isinstance(state, torch.Tensor):
        return state.detach()
    return tuple(detach_state(s) for s in state)


def train(model, data, epochs=2, bptt=12, lr=1e-2):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        hidden = model.init_hidden(data.size(1))
        for i in range(0, data.size(0) - 1, bptt):
            inputs, targets = data[i:i + bptt], data[i + 1:i + 1 + bptt]
            inputs = inputs[:len(targets)]
            hidden = detach_state(hidden)
            logits, hidden = model(inputs, hidden)
            loss = criterion(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab = 50
    corpus = torch.randint(0, vocab, (97, 4))  # (time, batch) token ids
    train(LSTMLanguageModel(vocab), corpus)
