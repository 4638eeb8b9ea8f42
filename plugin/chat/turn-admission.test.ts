import { TurnAdmission } from './turn-admission.ts';

/** Lets every promise callback that is ready run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('TurnAdmission', () => {
  it('lets in at most the bound, and the next turn once one leaves', async () => {
    const admission = new TurnAdmission(2);
    const first = await admission.enter();
    await admission.enter();
    let thirdIn = false;
    const third = admission.enter().then((leave) => {
      thirdIn = true;
      return leave;
    });
    await settle();
    expect(thirdIn).toBe(false);

    first();
    await third;
    expect(thirdIn).toBe(true);
  });

  it('lets waiting turns in in the order they came', async () => {
    const admission = new TurnAdmission(1);
    const leaveFirst = await admission.enter();
    const order: number[] = [];
    const waiting = [1, 2, 3].map((turn) =>
      admission.enter().then((leave) => {
        order.push(turn);
        leave();
      })
    );
    leaveFirst();
    await Promise.all(waiting);
    expect(order).toEqual([1, 2, 3]);
  });

  it('gives a place back once, however often a turn leaves', async () => {
    const admission = new TurnAdmission(1);
    const leave = await admission.enter();
    leave();
    const next = await admission.enter();
    leave(); // a second leave of the first turn must not let a third in beside the second
    let thirdIn = false;
    void admission.enter().then(() => {
      thirdIn = true;
    });
    await settle();
    expect(thirdIn).toBe(false);
    next();
    await settle();
    expect(thirdIn).toBe(true);
  });

  it('counts the turns waiting for a place, and no others', async () => {
    let waiting = 0;
    const admission = new TurnAdmission(1, { add: (delta) => (waiting += delta) });
    const leaveFirst = await admission.enter();
    expect(waiting).toBe(0);

    const second = admission.enter();
    const third = admission.enter();
    expect(waiting).toBe(2);

    leaveFirst();
    const leaveSecond = await second;
    expect(waiting).toBe(1);
    leaveSecond();
    (await third)();
    expect(waiting).toBe(0);
  });
});
