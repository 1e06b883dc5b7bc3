# ruff: noqa: UP008, UP032  (written as such scripts are: super(Net, self), str.format)
"""An image classifier's fully connected part and its training program written the way the classic
MNIST example scripts write them: flatten, Linear, relu, Dropout, Linear, log_softmax, nll_loss,
Adadelta with a StepLR decayed once per epoch, a test pass summing nll_loss(reduction='sum') and
counting argmax hits with pred.eq(target.view_as(pred)), progress lines built with str.format, over
a DataLoader of a TensorDataset of random 'images'.

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_mnist_mlp_style.py compares the two). Written for
these tests, not copied from any project.
"""

from types import SimpleNamespace


def build(torch, side=8, hidden=32, classes=10, flatten_module=False, dropout=0.0):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.flatten = nn.Flatten() if flatten_module else None
            self.dropout1 = nn.Dropout(dropout)
            self.fc1 = nn.Linear(side * side, hidden)
            self.dropout2 = nn.Dropout(dropout)
            self.fc2 = nn.Linear(hidden, classes)

        def forward(self, x):
            x = self.dropout1(x)
            x = self.flatten(x) if self.flatten is not None else torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    return Net()


def random_images(torch, images, labels):
    """A TensorDataset of (N, 1, side, side) float 'images' and int64 labels."""
    return torch.utils.data.TensorDataset(torch.tensor(images), torch.tensor(labels))


def train(torch, args, model, device, train_loader, optimizer, epoch, lines, losses):
    F = torch.nn.functional
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if batch_idx % args.log_interval == 0:
            lines.append(
                "Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                    epoch,
                    batch_idx * len(data),
                    len(train_loader.dataset),
                    100.0 * batch_idx / len(train_loader),
                    loss.item(),
                )
            )
            if args.dry_run:
                break


def test(torch, model, device, test_loader, lines):
    F = torch.nn.functional
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    lines.append(
        "Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)".format(
            test_loss,
            correct,
            len(test_loader.dataset),
            100.0 * correct / len(test_loader.dataset),
        )
    )
    return test_loss, correct


def main(torch, model, train_set, test_set, **overrides):
    """The script's main: device choice, loaders, Adadelta + StepLR, epochs of train and test."""
    from_lr_scheduler = torch.optim.lr_scheduler.StepLR
    args = SimpleNamespace(
        batch_size=16, test_batch_size=50, epochs=3, lr=1.0, gamma=0.7, log_interval=2,
        dry_run=False, shuffle=False, num_workers=0,
    )  # fmt: skip
    vars(args).update(overrides)
    use_cuda = torch.cuda.is_available()
    use_mps = torch.backends.mps.is_available()
    if use_cuda:
        device = torch.device("cuda")
    elif use_mps:
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    lines = ["Using Device: {}".format(device)]
    train_kwargs = {"batch_size": args.batch_size, "shuffle": args.shuffle}
    test_kwargs = {"batch_size": args.test_batch_size}
    if args.num_workers:
        loader_kwargs = {"num_workers": args.num_workers, "pin_memory": True}
        train_kwargs.update(loader_kwargs)
        test_kwargs.update(loader_kwargs)
    train_loader = torch.utils.data.DataLoader(train_set, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(test_set, **test_kwargs)
    model = model.to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = from_lr_scheduler(optimizer, step_size=1, gamma=args.gamma)
    losses, results, lrs = [], [], []
    for epoch in range(1, args.epochs + 1):
        train(torch, args, model, device, train_loader, optimizer, epoch, lines, losses)
        results.append(test(torch, model, device, test_loader, lines))
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
    return losses, results, lrs, lines
